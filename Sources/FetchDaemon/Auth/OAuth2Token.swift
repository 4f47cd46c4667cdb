import FetchEngine
import FoundationEssentials
import JSONRPC

/// The client-credentials token request and the reading of its answer (RFC 6749 4.4, 5.1,
/// 5.2), pure: the store sends the request through the engine directly, never through a
/// job's stages, so it waits for no host's limits and is never written to an HTTP log.
enum OAuth2Token {
    /// Longest token answer read.
    static let maxAnswerBytes = 1 << 20

    /// POST grant_type=client_credentials, the client authenticated with HTTP Basic (the
    /// scheme every server must accept, RFC 6749 2.3.1: id and secret form-encoded first).
    static func request(_ grant: OAuth2Grant, clientSecret: String) -> HTTPRequest {
        var items = [("grant_type", "client_credentials")]
        if let scope = grant.scope { items.append(("scope", scope)) }
        if let audience = grant.audience { items.append(("audience", audience)) }
        let id = URLEncoding.encode(grant.clientID, spaceAsPlus: true)
        let secret = URLEncoding.encode(clientSecret, spaceAsPlus: true)
        let basic = Data("\(id):\(secret)".utf8).base64EncodedString()
        return HTTPRequest(
            method: "POST", url: grant.tokenURL,
            headers: [HTTPHeader("Authorization", "Basic \(basic)"),
                      HTTPHeader("Content-Type", "application/x-www-form-urlencoded"),
                      HTTPHeader("Accept", "application/json")],
            body: .bytes(Array(URLEncoding.form(items).utf8)),
            timeoutMs: 30_000, connectTimeoutMs: 10_000, maxRedirects: 0, maxBodyBytes: maxAnswerBytes)
    }

    /// The credential of a token answer received at `now` (monotonic seconds), or why there
    /// is none. The reason names the status and the server's `error` code, never the body.
    static func credential(status: Int, body: [UInt8], grant: OAuth2Grant, now: Double) -> Result<Credential, AuthProblem> {
        let json = try? JSONCodec.decode(body)
        guard (200..<300).contains(status) else {
            var reason = "the token endpoint answered \(status)"
            if case .string(let code)? = json?.objectValue?["error"], code.utf8.count <= 100,
               code.unicodeScalars.allSatisfy({ $0.isASCII && $0.value >= 0x20 }) {
                reason += " (\(code))"
            }
            return .failure(AuthProblem(reason))
        }
        guard let object = json?.objectValue else {
            return .failure(AuthProblem("the token endpoint's answer is not a JSON object"))
        }
        guard case .string(let token)? = object["access_token"], !token.isEmpty,
              token.utf8.allSatisfy({ $0 >= 0x21 && $0 < 0x7f }) else {
            return .failure(AuthProblem("the token endpoint's answer has no usable access_token"))
        }
        if case .string(let type)? = object["token_type"], !type.caseInsensitiveEquals("bearer") {
            return .failure(AuthProblem("the token endpoint issued a token of type \(type.prefix(40)), not bearer"))
        }
        var credential = Credential.bearer(token)
        let expiresIn: Double? = switch object["expires_in"] {
        case .string(let text)?: Double(text)
        case let value?: value.numberValue
        case nil: nil
        }
        if let expiresIn, expiresIn.isFinite, expiresIn >= 0 {
            credential.expiresAt = now + expiresIn
            credential.usableUntil = now + expiresIn - grant.refreshMargin(expiresIn: expiresIn)
        }
        return .success(credential)
    }
}
