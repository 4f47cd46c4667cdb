import FetchEngine
import FoundationEssentials

/// The credential of the host's auth rule (`CredentialStore`): added to each attempt, or
/// the attempt waits while the rule's single fetch runs (a failed fetch fails the attempt,
/// -32001 kind `auth`). A 401 to an attempt that carried a fetched credential drops it and
/// makes one more attempt with a new one, once; the second 401 is the answer. Before the
/// host's limits, so a request never holds a host slot while it waits for its credential.
///
/// Skipped for `auth: false` and for requests with their own Authorization header. Every
/// header a rule adds is the credential, and it stays on the origin it was added for: a
/// request that carries one has its redirects followed by the daemon, one hop per step
/// (`RedirectFollowing`), and each hop gets the rule of its own origin, or none.
final class CredentialStage: Stage {
    let store: CredentialStore

    init(store: CredentialStore) {
        self.store = store
    }

    func prepare(_ attempt: Attempt, _ job: Job) throws -> Preparation {
        job.pipeline.auth.carried = nil
        // Once the daemon follows a job's redirects, it follows all of them (a hop back to
        // the rule's origin gets the rule again).
        if job.pipeline.auth.followsRedirects { job.pipeline.auth.redirects.takeOver(&attempt.request) }
        // A request a stub answers runs no auth rule (the stub stage decided before this one).
        guard job.spec.model.auth, attempt.substitute == nil else { return .proceed }
        let host = HostLimitStage.host(attempt, job)
        // With no rules (the usual case) this is one atomic load.
        guard let match = store.match(name: host.name, port: host.port),
              attempt.request.header(named: "Authorization") == nil else { return .proceed }
        let challenge = job.pipeline.auth.challenge
        job.pipeline.auth.challenge = nil
        if let (credential, generation) = store.ready(match) {
            Self.add(credential, generation: generation, of: match, to: attempt, job)
            return .proceed
        }
        let id = job.transferID
        let request = CredentialRequest(url: attempt.request.url, method: attempt.request.method, host: host.nameAndPort,
                                        challenge: challenge)
        return .hold(Hold(
            start: { [store] release in
                store.wait(match, id: id, for: request) { result in
                    switch result {
                    case .success(let (credential, generation)):
                        Self.add(credential, generation: generation, of: match, to: attempt, job)
                        release(.success(()))
                    case .failure(let problem as AuthProblem):
                        release(.failure(AuthFailed(jobID: job.id, rule: match.host, reason: problem.detail, attempts: job.attempts,
                                                    sharedReason: problem.reason)))
                    case .failure(let error):
                        release(.failure(error))
                    }
                }
            },
            cancel: { [store] error in store.cancel(match, id: id, error: error) }))
    }

    func judge(_ attempt: Attempt, _ outcome: AttemptOutcome, _ job: Job) -> Verdict {
        guard case .success(let answer) = outcome else { return .pass }
        if answer.status == 401 { return renewal(attempt, answer, job) }
        guard job.pipeline.auth.followsRedirects else { return .pass }
        switch job.pipeline.auth.redirects.redirect(answer, of: attempt.request, secrets: attempt.ruleSecrets) {
        case .stay: return .pass
        case .follow: return .follow
        case .fail(let error): return .fail(JobFailed(jobID: job.id, attempts: job.attempts, error: error))
        }
    }

    /// A 401 to an attempt that carried a fetched credential: a new one, once.
    private func renewal(_ attempt: Attempt, _ answer: HTTPResponse, _ job: Job) -> Verdict {
        guard let carried = job.pipeline.auth.carried, !job.pipeline.auth.renewed,
              let generation = carried.generation else { return .pass }
        // A 401 from another host, after a redirect libcurl followed, did not see the credential.
        if answer.redirects > 0 {
            let host = HostLimitStage.host(attempt, job)
            guard let final = try? RequestURL(answer.url), final.host.lowercased() == host.name, final.port == host.port else {
                return .pass
            }
        }
        job.pipeline.auth.renewed = true
        job.pipeline.auth.challenge = answer.headers.last(named: "WWW-Authenticate")
        store.drop(carried.match, generation: generation)
        return .next
    }

    /// Takes back what `add` put in the attempt (its URL now names another host).
    static func removeRuleCredential(from attempt: Attempt) {
        let secrets = Set(attempt.ruleSecrets)
        attempt.request.headers.removeAll { secrets.contains($0.value) }
        attempt.request.awsSigV4 = nil
        attempt.ruleSecrets = []
    }

    private static func add(_ credential: Credential, generation: Int?, of match: CredentialStore.Match,
                            to attempt: Attempt, _ job: Job) {
        attempt.request.headers.append(contentsOf: credential.headers)
        if let signing = credential.signing { attempt.request.awsSigV4 = signing }
        attempt.ruleSecrets = credential.secrets
        job.pipeline.auth.carried = CredentialState.Carried(match: match, generation: generation)
        // libcurl would send the rule's headers on to another origin: the daemon follows.
        job.pipeline.auth.redirects.takeOver(&attempt.request)
    }

    /// The headers a rule added to the attempt (what `add` put there): the cache keeps the
    /// answers to requests with different ones apart.
    static func ruleHeaders(of attempt: Attempt) -> [HTTPHeader] {
        guard !attempt.ruleSecrets.isEmpty else { return [] }
        let secrets = Set(attempt.ruleSecrets)
        return attempt.request.headers.filter { secrets.contains($0.value) }
    }
}

/// What the credential stage keeps across a job's attempts.
struct CredentialState: Sendable {
    struct Carried: Sendable {
        let match: CredentialStore.Match
        /// The fetched credential's generation; nil: a fixed one, which a new attempt would
        /// only send again.
        let generation: Int?
    }

    /// The rule's credential the current attempt carries.
    var carried: Carried?
    /// The one renewal after a 401 was made.
    var renewed = false
    /// The WWW-Authenticate of that 401, for the next fetch (a helper gets it).
    var challenge: String?

    /// The redirects the daemon follows for the job (most jobs: none, and libcurl follows
    /// theirs), behind one reference that is nil while idle: a `Job` stays small.
    var redirects: RedirectFollowing {
        get { redirectsBox.value ?? RedirectFollowing() }
        set { redirectsBox = Rare(newValue.isIdle ? nil : newValue) }
    }
    private var redirectsBox = Rare<RedirectFollowing>(nil)

    /// Whether the daemon follows the job's redirects (one load for a job it does not).
    var followsRedirects: Bool { redirectsBox.value?.limit != nil }
    /// Whether there is anything to read or reset (one load for a job without redirects).
    var hasRedirects: Bool { redirectsBox.isPresent }
}
