import FetchEngine
import JSONRPC

/// The JSON shape of a cookie (protocol.md, getCookies/setCookies) and the params the
/// cookie methods share, decoded once with field paths for every -32602.
enum CookieParams {
    static func json(_ cookie: Cookie) -> JSONValue {
        [
            "name": .string(cookie.name), "value": .string(cookie.value),
            "domain": .string(cookie.domain), "path": .string(cookie.path),
            "expires": cookie.expires.map(JSONValue.integer) ?? .null,
            "secure": .bool(cookie.secure), "httpOnly": .bool(cookie.httpOnly),
            "hostOnly": .bool(cookie.hostOnly),
        ]
    }

    /// `cookieJar`: a jar name; "default" when absent.
    static func jar(_ reader: inout ParamReader) throws(RPCError) -> String {
        guard let name = try reader.string("cookieJar") else { return "default" }
        guard !name.isEmpty else { throw RPCError.invalidParams(field: reader.field("cookieJar"), "a jar name may not be empty") }
        return name
    }

    /// `domain` filter: lowercase, without a leading dot.
    static func domain(_ reader: inout ParamReader) throws(RPCError) -> String? {
        guard let text = try reader.string("domain") else { return nil }
        return try validDomain(text, field: reader.field("domain"))
    }

    static func target(_ url: String, field: String) throws(RPCError) -> CookieTarget {
        do throws(RequestURL.Problem) {
            return try CookieTarget(url: url)
        } catch {
            switch error {
            case .malformed(let detail):
                throw RPCError.invalidParams(field: field, "malformed URL: \(detail)")
            case .schemeNotAllowed(let scheme):
                throw RPCError.invalidParams(field: field, "scheme \"\(scheme)\" has no cookies: only http and https")
            }
        }
    }

    /// One element of setCookies' `cookies`.
    static func cookie(_ value: JSONValue, field: String) throws(RPCError) -> Cookie {
        var reader = try ParamReader(value, path: field)
        let name = try reader.requiredString("name")
        guard !name.isEmpty, name.unicodeScalars.allSatisfy({ !isControl($0) && !" \t;=,".unicodeScalars.contains($0) }) else {
            throw RPCError.invalidParams(field: reader.field("name"), "a cookie name is a non-empty token: no spaces, controls, \";\", \"=\" or \",\"")
        }
        let value = try reader.requiredString("value")
        guard value.unicodeScalars.allSatisfy({ !isControl($0) && $0 != ";" }) else {
            throw RPCError.invalidParams(field: reader.field("value"), "a cookie value may not contain \";\" or control characters")
        }
        let url = try reader.string("url").map { (text: String) throws(RPCError) in try target(text, field: reader.field("url")) }
        let domain = try reader.string("domain").map { (text: String) throws(RPCError) in try validDomain(text, field: reader.field("domain")) }
        guard url != nil || domain != nil else {
            throw RPCError.invalidParams(field: reader.field("url"), "each cookie needs a url or a domain")
        }
        if let url, let domain, !Cookie.domainMatches(host: url.host, cookieDomain: domain, hostOnly: false) {
            throw RPCError.invalidParams(field: reader.field("domain"), "\(domain) is not \(url.host) or a parent domain of it")
        }
        var path = url?.defaultCookiePath ?? "/"
        if let given = try reader.string("path") {
            guard given.hasPrefix("/"), given.unicodeScalars.allSatisfy({ !isControl($0) && $0 != ";" }) else {
                throw RPCError.invalidParams(field: reader.field("path"), "a cookie path starts with \"/\" and has no \";\" or control characters")
            }
            path = given
        }
        var expires: Int64? = nil
        if let seconds = try reader.number("expires", in: 1...maxExpires) { expires = Int64(seconds) }
        let cookie = Cookie(
            name: name, value: value, domain: domain ?? url?.host ?? "", path: path, expires: expires,
            secure: try reader.bool("secure") ?? false, httpOnly: try reader.bool("httpOnly") ?? false,
            // A cookie given with only a URL is for that host, as a Set-Cookie without Domain.
            hostOnly: try reader.bool("hostOnly") ?? (domain == nil))
        try reader.finish()
        guard cookie.netscapeLine.utf8.count <= Cookie.maxLineBytes else {
            throw RPCError.invalidParams(field: field, "the cookie is longer than \(Cookie.maxLineBytes) bytes")
        }
        return cookie
    }

    /// 9999-12-31T23:59:59Z: past it the expiry is surely a mistake.
    static let maxExpires = 253_402_300_799.0

    private static func validDomain(_ text: String, field: String) throws(RPCError) -> String {
        var domain = Cookie.normalizedDomain(text)
        if domain.hasPrefix("["), domain.hasSuffix("]") { domain = String(domain.dropFirst().dropLast()) }
        guard !domain.isEmpty, domain.unicodeScalars.allSatisfy({ !isControl($0) && !" ;,/\\".unicodeScalars.contains($0) }) else {
            throw RPCError.invalidParams(field: field, "not a domain name")
        }
        return domain
    }

    private static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || scalar.value == 0x7f
    }
}
