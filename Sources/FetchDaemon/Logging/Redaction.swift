import FetchEngine
import FoundationEssentials
import JSONRPC

/// What HTTP logs hide by default: the values of credential headers and cookies, of JSON,
/// form and query fields named like secrets, and the secrets of every URL (`URLRedaction`,
/// the same rule as the diagnostic log's and error messages'). Every secret value found in
/// the request is also masked wherever else it appears (an echoing server's body, a URL).
struct Redaction: Sendable {
    static let mask = URLRedaction.mask
    static let secretHeaders: Set<String> = ["authorization", "proxy-authorization", "cookie", "set-cookie"]
    /// Headers whose value is a URL: redacted by the URL rule.
    static let urlHeaders: Set<String> = ["location", "content-location", "referer", "origin"]
    /// Values shorter than this are not masked elsewhere: too likely to hit innocent text.
    static let shortestMaskedValue = 4

    let enabled: Bool
    private(set) var values: Set<String> = []
    /// What an auth rule added to the request (`Attempt.ruleSecrets`), longest first:
    /// masked even when `enabled` is false, since the client never saw them.
    private(set) var ruleSecrets: [String]

    init(enabled: Bool, ruleSecrets: [String] = []) {
        self.enabled = enabled
        self.ruleSecrets = ruleSecrets.filter { !$0.isEmpty }.sorted { $0.utf8.count > $1.utf8.count }
    }

    private func maskRuleSecrets(_ value: JSONValue) -> JSONValue {
        switch value {
        case .object(let object): .object(JSONObject(object.members.map { ($0.key, maskRuleSecrets($0.value)) }))
        case .array(let items): .array(items.map(maskRuleSecrets))
        case .string(let s): .string(maskRuleSecrets(s))
        case .encoded(let text): maskRuleSecrets(text.decoded)
        default: value
        }
    }

    /// With redaction off: only the rule's secrets are masked.
    private func maskRuleSecrets(_ text: String) -> String {
        var result = text
        for secret in ruleSecrets where result.contains(secret) {
            result = result.replacing(secret, with: Self.mask)
        }
        return result
    }

    /// One rule for the names of query, form, JSON and multipart fields (`URLRedaction`).
    static func isSecretName(_ name: String) -> Bool {
        URLRedaction.isSecretName(name)
    }

    static func isSecretHeader(_ name: String) -> Bool {
        secretHeaders.contains(name.lowercased())
    }

    /// Learns the secret values a request carries, before anything is written.
    mutating func learn(from request: HTTPRequest, hops: [ExchangeHop]) {
        learnRuleSigned(hops)
        guard enabled else { return }
        learn(urls: [request.url] + hops.map(\.url), headers: request.headers + hops.flatMap { $0.requestHeaders + $0.responseHeaders })
        if case .bytes(let bytes) = request.body {
            if let json = try? JSONCodec.decode(bytes) { learnJSON(json) }
            if let text = String(validating: bytes, as: UTF8.self) {
                for (name, value) in Self.formItems(text) where Self.isSecretName(name) { remember(value) }
            }
        }
        if case .multipart(let form) = request.body {
            for part in form.parts where Self.isSecretName(part.name) {
                if case .bytes(let bytes) = part.source { remember(String(decoding: bytes, as: UTF8.self)) }
            }
        }
    }

    /// Learns the secrets of URLs and headers: credential and cookie values, and the URL
    /// secrets (userinfo passwords, secret parameters) of the URLs and of each header that
    /// carries one (Location, Referer ...).
    mutating func learn(urls: [String], headers: [HTTPHeader]) {
        guard enabled else { return }
        for header in headers { learnHeader(header) }
        let headerURLs = headers.filter { Self.urlHeaders.contains($0.name.lowercased()) }.map(\.value)
        for url in urls + headerURLs {
            URLRedaction.secrets(in: url).forEach { remember($0) }
        }
    }

    /// What libcurl made from a rule's secrets as it sent them (an AWS SigV4 Authorization:
    /// its whole value and its signature) is masked as the rule's secrets are.
    private mutating func learnRuleSigned(_ hops: [ExchangeHop]) {
        guard !ruleSecrets.isEmpty else { return }
        var derived: [String] = []
        for header in hops.flatMap(\.requestHeaders) where Self.isSecretHeader(header.name) {
            guard ruleSecrets.contains(where: header.value.contains) else { continue }
            derived.append(header.value)
            for part in header.value.split(whereSeparator: { $0 == " " || $0 == "," }) where part.hasPrefix("Signature=") {
                derived.append(String(part.dropFirst("Signature=".count)))
            }
        }
        guard !derived.isEmpty else { return }
        ruleSecrets = (ruleSecrets + derived).filter { !$0.isEmpty }.sorted { $0.utf8.count > $1.utf8.count }
    }

    /// The credential of an Authorization header (after its scheme word), and the values,
    /// not the names or attributes, of cookies.
    private mutating func learnHeader(_ header: HTTPHeader) {
        let name = header.name.lowercased()
        guard Self.secretHeaders.contains(name) else { return }
        switch name {
        case "cookie":
            for pair in header.value.split(separator: ";") { remember(Self.cookieValue(pair)) }
        case "set-cookie":
            if let first = header.value.split(separator: ";").first { remember(Self.cookieValue(first)) }
        default:
            remember(header.value)
            let words = header.value.split(separator: " ", maxSplits: 1)
            if words.count == 2 { remember(String(words[1])) }
        }
    }

    private static func cookieValue(_ pair: Substring) -> String {
        let parts = pair.split(separator: "=", maxSplits: 1)
        return parts.count == 2 ? String(parts[1]) : ""
    }

    private mutating func learnJSON(_ value: JSONValue) {
        switch value {
        case .object(let object):
            for (key, member) in object.members {
                if Self.isSecretName(key) {
                    if case .string(let s) = member { remember(s) } else { remember(JSONCodec.encodeString(member)) }
                }
                learnJSON(member)
            }
        case .array(let items): items.forEach { learnJSON($0) }
        case .encoded(let text): learnJSON(text.decoded)
        default: break
        }
    }

    private mutating func remember(_ value: String) {
        let trimmed = value.trimmingBlanks()
        guard trimmed.utf8.count >= Self.shortestMaskedValue else { return }
        values.insert(trimmed)
        // Also as it would appear percent-encoded in a URL or a form.
        values.insert(URLEncoding.encode(trimmed, spaceAsPlus: false))
        values.insert(URLEncoding.encode(trimmed, spaceAsPlus: true))
    }

    // MARK: applying

    func header(_ header: HTTPHeader) -> HTTPHeader {
        guard enabled else {
            guard !ruleSecrets.isEmpty else { return header }
            // A credential header the rule added is masked whole, as with redaction on.
            if Self.isSecretHeader(header.name), ruleSecrets.contains(where: header.value.contains) {
                return HTTPHeader(header.name, Self.mask)
            }
            return HTTPHeader(header.name, maskRuleSecrets(header.value))
        }
        if Self.isSecretHeader(header.name) { return HTTPHeader(header.name, Self.mask) }
        if Self.urlHeaders.contains(header.name.lowercased()) { return HTTPHeader(header.name, url(header.value)) }
        return HTTPHeader(header.name, text(header.value))
    }

    /// A URL, absolute or relative: the URL rule, then every learned secret.
    func url(_ url: String) -> String {
        guard enabled else { return maskRuleSecrets(url) }
        return maskLearned(URLRedaction.redact(url))
    }

    func field(name: String, value: String) -> String {
        guard enabled else { return maskRuleSecrets(value) }
        return Self.isSecretName(name) ? Self.mask : text(value)
    }

    /// Free text: the URL rule for every absolute URL in it, then every learned secret
    /// value masked (longest first).
    func text(_ text: String) -> String {
        guard enabled else { return maskRuleSecrets(text) }
        return maskLearned(URLRedaction.redactURLs(in: text))
    }

    private func maskLearned(_ text: String) -> String {
        var result = maskRuleSecrets(text)
        guard !values.isEmpty else { return result }
        for value in values.sorted(by: { $0.utf8.count > $1.utf8.count }) where result.contains(value) {
            result = result.replacing(value, with: Self.mask)
        }
        return result
    }

    func json(_ value: JSONValue) -> JSONValue {
        guard enabled else { return ruleSecrets.isEmpty ? value : maskRuleSecrets(value) }
        switch value {
        case .object(let object):
            return .object(JSONObject(object.members.map { key, member in
                (key, Self.isSecretName(key) ? .string(Self.mask) : json(member))
            }))
        case .array(let items): return .array(items.map(json))
        case .string(let s): return .string(text(s))
        // Written ahead as text: masked as the values it stands for.
        case .encoded(let encoded): return json(encoded.decoded)
        default: return value
        }
    }

    // MARK: parsing helpers

    static func queryItems(_ url: String) -> [(String, String)] {
        guard let question = url.firstIndex(of: "?") else { return [] }
        var query = url[url.index(after: question)...]
        if let hash = query.firstIndex(of: "#") { query = query[..<hash] }
        return formItems(String(query))
    }

    static func formItems(_ text: String) -> [(String, String)] {
        text.split(separator: "&").map { pair in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            return (decode(parts[0]), parts.count > 1 ? decode(parts[1]) : "")
        }
    }

    static func decode(_ text: Substring) -> String {
        let plus = String(text.replacing("+", with: " "))
        return URLEncoding.decode(plus) ?? plus
    }
}
