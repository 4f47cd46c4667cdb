import FetchEngine
import FoundationEssentials

/// A stub's Set-Cookie headers, read as a browser reads them (RFC 6265 section 5.2, the
/// parts libcurl's jar keeps): the cookies then go to the request's jar, as a real answer's
/// would. A Domain that does not cover the request's host drops the cookie, as libcurl does.
enum StubCookies {
    static func cookies(from headers: [HTTPHeader], url: String, now: Date) -> [Cookie] {
        guard headers.contains(where: { $0.name.caseInsensitiveEquals("Set-Cookie") }),
              let target = try? CookieTarget(url: url) else { return [] }
        return headers.filter { $0.name.caseInsensitiveEquals("Set-Cookie") }.compactMap { parse($0.value, target: target, now: now) }
    }

    static func parse(_ line: String, target: CookieTarget, now: Date) -> Cookie? {
        let parts = line.split(separator: ";", omittingEmptySubsequences: false).map { $0.trimmingBlanks() }
        guard let pair = parts.first, let equals = pair.firstIndex(of: "=") else { return nil }
        let name = pair[..<equals].trimmingBlanks()
        guard !name.isEmpty else { return nil }
        var cookie = Cookie(name: name, value: pair[pair.index(after: equals)...].trimmingBlanks(), domain: target.host,
                            path: target.defaultCookiePath)
        var maxAge: Int64?
        var expires: Int64?
        for attribute in parts.dropFirst() {
            let split = attribute.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let key = split[0].trimmingBlanks().lowercased()
            let value = split.count > 1 ? split[1].trimmingBlanks() : ""
            switch key {
            case "domain" where !value.isEmpty:
                let domain = Cookie.normalizedDomain(value)
                guard Cookie.domainMatches(host: target.host, cookieDomain: domain, hostOnly: false) else { return nil }
                cookie.domain = domain
                cookie.hostOnly = false
            case "path" where value.hasPrefix("/"):
                cookie.path = value
            case "max-age":
                if let seconds = Int64(value) { maxAge = seconds }
            case "expires":
                if let seconds = RetryAfter.seconds(from: value, now: now) { expires = seconds > 0 ? Int64(now.timeIntervalSince1970 + seconds) : 1 }
            case "secure":
                cookie.secure = true
            case "httponly":
                cookie.httpOnly = true
            default:
                break
            }
        }
        // Max-Age wins over Expires; zero or less deletes.
        if let maxAge { cookie.expires = maxAge > 0 ? Int64(now.timeIntervalSince1970) + maxAge : 1 } else { cookie.expires = expires }
        return cookie
    }
}
