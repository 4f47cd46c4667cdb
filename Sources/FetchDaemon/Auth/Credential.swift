import FetchEngine
import FoundationEssentials

/// A credential ready to add to requests: its headers, the texts HTTP logs must mask
/// whatever `redact` says, and how long it may be used.
struct Credential: Sendable, Equatable {
    var headers: [HTTPHeader]
    /// Every form in which its secret could appear (the header value, the token alone).
    var secrets: [String]
    /// Monotonic seconds after which it is fetched again; nil: until a 401 drops it.
    var usableUntil: Double?
    /// When its issuer says it expires (monotonic seconds), for getAuth's `expiresAt`.
    var expiresAt: Double?
    /// Kept for later requests (a token); false: only the requests that waited for this
    /// fetch use it (a file read at each use).
    var kept: Bool
    /// AWS Signature Version 4: libcurl signs the request with these keys.
    var signing: AWSSigV4? = nil

    static func bearer(_ token: String, kept: Bool = true) -> Credential {
        Credential(headers: [HTTPHeader("Authorization", "Bearer \(token)")], secrets: ["Bearer \(token)", token],
                   usableUntil: nil, expiresAt: nil, kept: kept)
    }

    static func aws(provider: String, _ keys: AWSSigV4Rule.Keys, kept: Bool = true) -> Credential {
        var credential = Credential(headers: [], secrets: [keys.secretAccessKey, keys.accessKeyID], usableUntil: nil, expiresAt: nil,
                                    kept: kept)
        credential.signing = AWSSigV4(provider: provider, accessKeyID: keys.accessKeyID, secretAccessKey: keys.secretAccessKey)
        if let token = keys.sessionToken {
            credential.headers.append(HTTPHeader("X-Amz-Security-Token", token))
            credential.secrets.append(token)
        }
        return credential
    }

    static func basic(user: String, password: String, kept: Bool = true) -> Credential {
        let encoded = Data("\(user):\(password)".utf8).base64EncodedString()
        return Credential(headers: [HTTPHeader("Authorization", "Basic \(encoded)")],
                          secrets: ["Basic \(encoded)", encoded, password], usableUntil: nil, expiresAt: nil, kept: kept)
    }
}

/// The request that needs a credential fetched (what a helper is told).
struct CredentialRequest: Sendable {
    let url: String
    let method: String
    let host: String
    /// The WWW-Authenticate of the 401 that made this fetch, else nil.
    let challenge: String?
}

/// Why a credential could not be made (a token endpoint's refusal, an unreadable file):
/// never a secret, since it is shown to clients and in getAuth's `lastError`.
struct AuthProblem: Error, Sendable, Equatable {
    /// In the daemon's words: every request that waited for the fetch is told, and getAuth.
    let reason: String
    /// The first line of a helper's stderr, its own words: told only to the request that ran
    /// the helper, and written to the daemon's log (URLs redacted, as everywhere).
    var helperSaid: String? = nil

    init(_ reason: String, helperSaid: String? = nil) {
        self.reason = reason
        self.helperSaid = helperSaid
    }

    /// The whole text, for the request that ran the fetch and the daemon's log.
    var detail: String { helperSaid.map { "\(reason): \($0)" } ?? reason }

    /// What the other requests that waited are told.
    var withoutHelperWords: AuthProblem { AuthProblem(reason) }
}

/// One rule's credential over time, pure (the clock is an argument): the one held, and the
/// single flight that fetches the next: while a fetch runs every request that needs the
/// credential waits for it, and they all get its result. `Waiter` is what a waiting request
/// is resumed with.
struct CredentialCache<Waiter> {
    private(set) var held: Credential?
    /// Counts the credentials fetched; a 401 drops the held credential only when it is the
    /// one the request carried, not a newer one another request fetched meanwhile.
    private(set) var generation = 0
    private(set) var fetching = false
    private(set) var lastError: String?
    private var waiters: [(id: UInt64, waiter: Waiter)] = []

    var waiting: Int { waiters.count }

    enum Lookup {
        /// Use this credential now (the waiter is not kept).
        case ready(Credential, generation: Int)
        /// The waiter is kept until a fetch ends; `startFetch`: none runs, the caller starts it.
        case wait(startFetch: Bool)
    }

    /// The held credential, if it may still be used at `now`.
    func usable(now: Double) -> (Credential, generation: Int)? {
        guard let held, held.usableUntil.map({ now < $0 }) ?? true else { return nil }
        return (held, generation)
    }

    /// The credential now, or `waiter` kept until the fetch (started by the first waiter) ends.
    mutating func lookup(now: Double, id: UInt64, waiter: Waiter) -> Lookup {
        if let (credential, generation) = usable(now: now) { return .ready(credential, generation: generation) }
        held = nil
        waiters.append((id, waiter))
        guard !fetching else { return .wait(startFetch: false) }
        fetching = true
        return .wait(startFetch: true)
    }

    /// The fetch ended: every waiter gets its result (the caller resumes them, outside any lock).
    mutating func fetched(_ result: Result<Credential, AuthProblem>) -> (waiters: [Waiter], generation: Int) {
        fetching = false
        switch result {
        case .success(let credential):
            generation += 1
            lastError = nil
            held = credential.kept ? credential : nil
        case .failure(let problem):
            lastError = problem.reason
            held = nil
        }
        defer { waiters = [] }
        return (waiters.map(\.waiter), generation)
    }

    /// A 401 to a request that carried generation `generation`: that credential is dropped.
    @discardableResult
    mutating func drop(generation dropped: Int) -> Bool {
        guard held != nil, generation == dropped else { return false }
        held = nil
        return true
    }

    /// A waiter gave up (its job was cancelled): it is not resumed.
    mutating func cancel(id: UInt64) -> Waiter? {
        guard let index = waiters.firstIndex(where: { $0.id == id }) else { return nil }
        return waiters.remove(at: index).waiter
    }
}

/// A request failed because its rule's credential could not be made: -32001 kind `auth`
/// (ErrorMapping), naming the rule and the reason.
struct AuthFailed: Error, Sendable, RequesterOnlyDetail {
    let jobID: String
    /// The rule's host pattern.
    let rule: String
    /// As the job's own request is told (`AuthProblem.detail`).
    let reason: String
    let attempts: Int
    /// As everyone else is told (getJob, attach, HTTP logs): without the helper's words.
    var sharedReason: String? = nil

    var withoutRequesterDetail: any Error {
        AuthFailed(jobID: jobID, rule: rule, reason: sharedReason ?? reason, attempts: attempts)
    }
}
