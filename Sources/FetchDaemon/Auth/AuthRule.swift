import FetchEngine
import JSONRPC

/// One `setAuth` rule: which hosts it covers and how their credential is made. Decoded once
/// from the params; the secrets it holds (an inline token, password or client secret) never
/// leave the daemon: answers show only `AuthStatus`.
struct AuthRule: Sendable {
    /// A secret given inline, or a file read at each use (so a rotated file is picked up).
    enum Secret: Sendable, Equatable {
        case inline(String)
        case file(String)
    }

    enum Kind: Sendable {
        case bearer(token: Secret)
        case basic(user: String, password: Secret)
        case oauth2(OAuth2Grant)
        case awsSigV4(AWSSigV4Rule)
        case helper(HelperRule)
    }

    let host: AuthHostPattern
    let kind: Kind

    /// The `type` of setAuth and getAuth.
    var type: String {
        switch kind {
        case .bearer: "bearer"
        case .basic: "basic"
        case .oauth2: "oauth2"
        case .awsSigV4: "awsSigV4"
        case .helper: "helper"
        }
    }

    /// Given inline: the credential is made once and never changes, so there is nothing to
    /// fetch and a 401 is not worth a second try with the same credential.
    var fixedCredential: Credential? {
        switch kind {
        case .bearer(.inline(let token)): Credential.bearer(token)
        case .basic(let user, .inline(let password)): Credential.basic(user: user, password: password)
        case .awsSigV4(let rule):
            if case .inline(let keys) = rule.keys { Credential.aws(provider: rule.provider, keys) } else { nil }
        default: nil
        }
    }

    /// The type names setAuth accepts (`null` removes the host's rule).
    static let types = ["bearer", "basic", "oauth2", "awsSigV4", "helper"]

    /// Reads a setAuth params object (its `host` and `type` included); nil for `type: null`,
    /// which removes the host's rule. Every mistake is -32602 naming the field.
    static func read(_ params: JSONValue?, path: String = "", policy: FilePolicy) throws -> (AuthHostPattern, AuthRule?) {
        var reader = try ParamReader(params, path: path)
        let hostText = try reader.requiredString("host")
        guard let host = AuthHostPattern(hostText) else {
            throw RPCError.invalidParams(field: reader.field("host"), "expected name, name:port or *.domain")
        }
        guard let typeValue = reader.value("type") else {
            throw RPCError.invalidParams(field: reader.field("type"), "required: one of \(types.joined(separator: ", ")), or null to remove the rule")
        }
        let kind: Kind
        switch typeValue {
        case .null:
            try reader.finish()
            return (host, nil)
        case .string("bearer"):
            kind = .bearer(token: try secret(&reader, inline: "token", file: "tokenFile", policy: policy))
        case .string("basic"):
            let user = try reader.requiredString("user")
            guard !user.contains(":") else {
                throw RPCError.invalidParams(field: reader.field("user"), "a basic user name cannot contain a colon")
            }
            try HTTPSyntax.checkFieldValue(user, field: reader.field("user"))
            kind = .basic(user: user, password: try secret(&reader, inline: "password", file: "passwordFile", policy: policy))
        case .string("oauth2"):
            kind = .oauth2(try OAuth2Grant(reading: &reader, policy: policy))
        case .string("awsSigV4"):
            kind = .awsSigV4(try AWSSigV4Rule(reading: &reader, policy: policy))
        case .string("helper"):
            kind = .helper(try HelperRule(reading: &reader))
        default:
            throw RPCError.invalidParams(field: reader.field("type"), "expected one of \(types.joined(separator: ", ")), or null")
        }
        try reader.finish()
        return (host, AuthRule(host: host, kind: kind))
    }

    /// Exactly one of the inline field and the file field.
    static func secret(_ reader: inout ParamReader, inline: String, file: String, policy: FilePolicy) throws -> Secret {
        let text = try reader.string(inline)
        let path = try reader.string(file)
        switch (text, path) {
        case (let text?, nil):
            guard !text.isEmpty else { throw RPCError.invalidParams(field: reader.field(inline), "must not be empty") }
            try HTTPSyntax.checkFieldValue(text, field: reader.field(inline))
            return .inline(text)
        case (nil, let path?):
            try policy.checkReadable(path, field: reader.field(file))
            return .file(path)
        case (nil, nil):
            throw RPCError.invalidParams(field: reader.field(inline), "required: \(inline) or \(file)")
        case (_?, _?):
            throw RPCError.invalidParams(field: reader.field(file), "only one of \(inline) and \(file) may be given")
        }
    }
}

/// OAuth 2.0's client-credentials grant (RFC 6749 4.4): the daemon asks `tokenURL` for a
/// token with the client's id and secret and caches it until `refreshBefore` seconds before
/// it expires.
struct OAuth2Grant: Sendable {
    let tokenURL: String
    let clientID: String
    let clientSecret: AuthRule.Secret
    let scope: String?
    let audience: String?
    /// nil: the default, 60 s or half the token's lifetime when that is shorter.
    let refreshBefore: Double?

    init(tokenURL: String, clientID: String, clientSecret: AuthRule.Secret, scope: String? = nil, audience: String? = nil,
         refreshBefore: Double? = nil) {
        self.tokenURL = tokenURL
        self.clientID = clientID
        self.clientSecret = clientSecret
        self.scope = scope
        self.audience = audience
        self.refreshBefore = refreshBefore
    }

    init(reading reader: inout ParamReader, policy: FilePolicy) throws {
        let url = try reader.requiredString("tokenUrl")
        do {
            _ = try RequestURL(url)
        } catch {
            throw RPCError.invalidParams(field: reader.field("tokenUrl"), "expected an http or https URL")
        }
        tokenURL = url
        clientID = try reader.requiredString("clientId")
        try HTTPSyntax.checkFieldValue(clientID, field: reader.field("clientId"))
        clientSecret = try AuthRule.secret(&reader, inline: "clientSecret", file: "clientSecretFile", policy: policy)
        scope = try reader.string("scope")
        audience = try reader.string("audience")
        refreshBefore = try reader.number("refreshBefore", in: 0...86_400)
    }

    /// Seconds before `expiresIn` at which a token is renewed.
    func refreshMargin(expiresIn: Double) -> Double {
        if let refreshBefore { return min(refreshBefore, expiresIn) }
        return min(60, expiresIn / 2)
    }
}

/// AWS Signature Version 4, signed by libcurl (CURLOPT_AWS_SIGV4) on every request: keys given
/// inline, or an AWS shared credentials file read at each use.
struct AWSSigV4Rule: Sendable {
    struct Keys: Sendable, Equatable {
        let accessKeyID: String
        let secretAccessKey: String
        let sessionToken: String?
    }

    enum Source: Sendable {
        case inline(Keys)
        case file(path: String, profile: String)
    }

    /// As curl's `--aws-sigv4`: `provider1[:provider2[:region[:service]]]`.
    let provider: String
    let keys: Source

    init(reading reader: inout ParamReader, policy: FilePolicy) throws {
        let provider = try reader.requiredString("provider")
        let parts = provider.split(separator: ":", omittingEmptySubsequences: false)
        guard (1...4).contains(parts.count), parts.allSatisfy({ part in
            !part.isEmpty && part.utf8.count <= 64 && part.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "-_.".contains($0)) }
        }) else {
            throw RPCError.invalidParams(field: reader.field("provider"), "expected provider1[:provider2[:region[:service]]], as curl's --aws-sigv4 (\"aws:amz:eu-west-1:s3\")")
        }
        self.provider = provider
        let id = try reader.string("accessKeyId")
        let secret = try reader.string("secretAccessKey")
        let token = try reader.string("sessionToken")
        let file = try reader.string("credentialsFile")
        let profile = try reader.string("profile")
        switch (id, secret, file) {
        case (let id?, let secret?, nil):
            guard profile == nil else { throw RPCError.invalidParams(field: reader.field("profile"), "only with credentialsFile") }
            for (value, field) in [(id, "accessKeyId"), (secret, "secretAccessKey"), (token ?? "x", "sessionToken")] {
                guard !value.isEmpty, !value.contains(":") || field == "sessionToken" else {
                    throw RPCError.invalidParams(field: reader.field(field), "must not be empty or hold a colon")
                }
                try HTTPSyntax.checkFieldValue(value, field: reader.field(field))
            }
            keys = .inline(Keys(accessKeyID: id, secretAccessKey: secret, sessionToken: token))
        case (nil, nil, let path?):
            guard token == nil else { throw RPCError.invalidParams(field: reader.field("sessionToken"), "comes from the credentials file") }
            try policy.checkReadable(path, field: reader.field("credentialsFile"))
            keys = .file(path: path, profile: profile ?? "default")
        case (nil, nil, nil):
            throw RPCError.invalidParams(field: reader.field("accessKeyId"), "required: accessKeyId and secretAccessKey, or credentialsFile")
        case (_, nil, nil):
            throw RPCError.invalidParams(field: reader.field("secretAccessKey"), "required with accessKeyId")
        case (nil, _, nil):
            throw RPCError.invalidParams(field: reader.field("accessKeyId"), "required with secretAccessKey")
        default:
            throw RPCError.invalidParams(field: reader.field("credentialsFile"), "either credentialsFile or the keys, not both")
        }
    }

    /// The keys of `profile` in an AWS shared credentials file (`[name]` or `[profile name]`
    /// sections of `aws_access_key_id`, `aws_secret_access_key`, `aws_session_token`).
    static func keys(inCredentialsFile text: String, profile: String) -> Keys? {
        var section: String?
        var values: [String: String] = [:]
        for raw in text.split(whereSeparator: { $0 == "\n" || $0 == "\r" }) {
            let line = CredentialFetcher.trimmed(String(raw))
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
            if line.hasPrefix("["), line.hasSuffix("]") {
                var name = CredentialFetcher.trimmed(String(line.dropFirst().dropLast()))
                if name.hasPrefix("profile ") { name = CredentialFetcher.trimmed(String(name.dropFirst(8))) }
                section = name
                continue
            }
            guard section == profile, let equals = line.firstIndex(of: "=") else { continue }
            let key = CredentialFetcher.trimmed(String(line[..<equals])).lowercased()
            values[key] = CredentialFetcher.trimmed(String(line[line.index(after: equals)...]))
        }
        guard let id = values["aws_access_key_id"], !id.isEmpty,
              let secret = values["aws_secret_access_key"], !secret.isEmpty else { return nil }
        return Keys(accessKeyID: id, secretAccessKey: secret, sessionToken: values["aws_session_token"].flatMap { $0.isEmpty ? nil : $0 })
    }
}
