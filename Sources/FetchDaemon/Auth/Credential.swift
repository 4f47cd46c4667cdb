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
