internal import CCurl
import FoundationEssentials
import Glibc

/// Where a request goes, as far as cookies care: scheme, host and path.
public struct CookieTarget: Sendable, Equatable {
    public let scheme: String
    /// Lowercase; an IPv6 address without brackets.
    public let host: String
    /// The URL's path without query, "/" when empty.
    public let path: String

    public init(scheme: String, host: String, path: String) {
        self.scheme = scheme.lowercased()
        var host = host.lowercased()
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        self.host = host
        self.path = path.hasPrefix("/") ? path : "/"
    }

    /// Parsed by libcurl's own URL parser, as the request itself would be.
    public init(url text: String) throws(RequestURL.Problem) {
        let url = try RequestURL(text)
        var path = "/"
        if let handle = curl_url() {
            defer { curl_url_cleanup(handle) }
            var value: UnsafeMutablePointer<CChar>? = nil
            if curl_url_set(handle, CURLUPART_URL, text, 0) == CURLUE_OK,
               curl_url_get(handle, CURLUPART_PATH, &value, 0) == CURLUE_OK, let value {
                path = String(cString: value)
                curl_free(value)
            }
        }
        self.init(scheme: url.scheme, host: url.host, path: path)
    }

    /// libcurl sends Secure cookies over https, and also to localhost over plain http
    /// (a "secure context", as browsers treat it).
    public var isSecureContext: Bool {
        scheme == "https" || host == "localhost" || host == "127.0.0.1" || host == "::1"
    }

    /// The path a cookie set by a response to this URL gets when it names none (RFC 6265
    /// 5.1.4): the directory of the request path.
    public var defaultCookiePath: String {
        guard let slash = path.lastIndex(of: "/"), slash != path.startIndex else { return "/" }
        return String(path[..<slash])
    }

    /// Whether `host` is an IP address literal (cookies for an address are host-only).
    public var hostIsAddress: Bool { Self.isAddress(host) }

    static func isAddress(_ host: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, host, &v4) == 1 || inet_pton(AF_INET6, host, &v6) == 1
    }
}

extension Cookie {
    /// RFC 6265 5.4: would a request to `target` carry this cookie at time `now`?
    public func matches(_ target: CookieTarget, now: Int64) -> Bool {
        !isExpired(now: now)
            && (!secure || target.isSecureContext)
            && Self.domainMatches(host: target.host, cookieDomain: domain, hostOnly: hostOnly)
            && Self.pathMatches(requestPath: target.path, cookiePath: path)
    }

    /// Host-only cookies (and any cookie for an IP address) need the very host; domain
    /// cookies also go to subdomains, on a "." boundary.
    public static func domainMatches(host: String, cookieDomain: String, hostOnly: Bool) -> Bool {
        let host = host.lowercased()
        if host == cookieDomain { return true }
        if hostOnly || CookieTarget.isAddress(host) { return false }
        return host.hasSuffix("." + cookieDomain)
    }

    /// RFC 6265 5.1.4: equal, or the cookie path is a prefix that ends at a "/" boundary.
    /// "/docs" matches "/docs", "/docs/" and "/docs/a", never "/docsearch".
    public static func pathMatches(requestPath: String, cookiePath: String) -> Bool {
        // Byte-wise, as libcurl compares: no Unicode normalization in URL paths.
        let request = Array(requestPath.utf8), cookie = Array(cookiePath.utf8)
        if request == cookie { return true }
        guard request.starts(with: cookie) else { return false }
        if cookie.last == UInt8(ascii: "/") { return true }
        return request[cookie.count] == UInt8(ascii: "/")
    }

    /// `domain` filter of getCookies and clearCookies: the domain itself and its subdomains.
    public func isWithin(domain filter: String) -> Bool {
        let filter = Cookie.normalizedDomain(filter)
        return domain == filter || domain.hasSuffix("." + filter)
    }
}

extension Sequence where Element == Cookie {
    /// The cookies a request to `target` sends, in libcurl's order (lib/cookie.c
    /// cookie_sort): longer paths first, then longer domains, then longer names; libcurl's
    /// last key, creation time, is not in the jar's listing, so equal ones go by name.
    public func cookies(for target: CookieTarget, now: Int64) -> [Cookie] {
        filter { $0.matches(target, now: now) }.sorted { a, b in
            if a.path.utf8.count != b.path.utf8.count { return a.path.utf8.count > b.path.utf8.count }
            if a.domain.utf8.count != b.domain.utf8.count { return a.domain.utf8.count > b.domain.utf8.count }
            if a.name.utf8.count != b.name.utf8.count { return a.name.utf8.count > b.name.utf8.count }
            return a.name < b.name
        }
    }
}
