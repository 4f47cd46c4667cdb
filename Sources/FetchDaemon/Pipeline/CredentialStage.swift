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
/// request that carries one is not redirected by libcurl: `RedirectStage` follows its
/// redirects, one hop per step, and each hop gets the rule of its own origin, or none.
final class CredentialStage: Stage {
    /// What the credential stage keeps across a job's attempts.
    struct State: DefaultJobState {
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
    }

    let store: CredentialStore

    init(store: CredentialStore) {
        self.store = store
    }

    func prepare(_ attempt: Attempt, _ job: Job) throws -> Preparation {
        if job.state(of: self).carried != nil { job.withState(of: self) { $0.carried = nil } }
        // A request a stub answers runs no auth rule (the stub stage decided before this one).
        guard job.spec.model.auth, attempt.substitute == nil else { return .proceed }
        let host = job.host(of: attempt)
        // With no rules (the usual case) this is one atomic load.
        guard let match = store.match(name: host.name, port: host.port),
              attempt.request.header(named: "Authorization") == nil else { return .proceed }
        let challenge = job.withState(of: self) { state in
            defer { state.challenge = nil }
            return state.challenge
        }
        if let (credential, generation) = store.ready(match) {
            add(credential, generation: generation, of: match, to: attempt, job)
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
                        self.add(credential, generation: generation, of: match, to: attempt, job)
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

    /// A 401 to an attempt that carried a fetched credential: a new one, once.
    func judge(_ attempt: Attempt, _ outcome: AttemptOutcome, _ job: Job) -> Verdict {
        guard outcome.successStatus == 401, case .success(let answer) = outcome else { return .pass }
        let state = job.state(of: self)
        guard let carried = state.carried, !state.renewed, let generation = carried.generation else { return .pass }
        // A 401 from another host, after a redirect libcurl followed, did not see the credential.
        if answer.redirects > 0 {
            let host = job.host(of: attempt)
            guard let final = try? RequestURL(answer.url), final.host.lowercased() == host.name, final.port == host.port else {
                return .pass
            }
        }
        job.withState(of: self) { state in
            state.renewed = true
            state.challenge = answer.headers.last(named: "WWW-Authenticate")
        }
        store.drop(carried.match, generation: generation)
        return .next
    }

    /// The rule's credential goes into the attempt as its secrets; libcurl then follows none
    /// of its redirects (it would send the rule's headers on to another origin): the daemon
    /// does, hop by hop (`RedirectStage`).
    private func add(_ credential: Credential, generation: Int?, of match: CredentialStore.Match,
                     to attempt: Attempt, _ job: Job) {
        attempt.request.headers.append(contentsOf: credential.headers)
        if let signing = credential.signing { attempt.request.awsSigV4 = signing }
        attempt.secrets += credential.secrets
        attempt.request.maxRedirects = 0
        job.withState(of: self) { $0.carried = State.Carried(match: match, generation: generation) }
    }
}

extension Attempt {
    /// Takes out the credential a stage added (its URL now names another host): the headers
    /// whose values are its secrets, and a signature.
    func removeSecrets() {
        let secrets = Set(self.secrets)
        request.headers.removeAll { secrets.contains($0.value) }
        request.awsSigV4 = nil
        self.secrets = []
    }

    /// The headers that carry the attempt's secrets (a rule's credential): the cache keeps
    /// the answers to requests with different ones apart.
    var secretHeaders: [HTTPHeader] {
        guard !secrets.isEmpty else { return [] }
        let secrets = Set(self.secrets)
        return request.headers.filter { secrets.contains($0.value) }
    }
}
