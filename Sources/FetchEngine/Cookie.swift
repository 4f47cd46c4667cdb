/// One cookie as a jar holds it: the fields of a Netscape cookies.txt line, named.
public struct Cookie: Sendable, Equatable {
    public var name: String
    public var value: String
    /// Lowercase, without a leading dot.
    public var domain: String
    public var path: String
    /// Unix seconds; nil for a session cookie (kept until the daemon stops, never written
    /// to the cookie file).
    public var expires: Int64?
    public var secure: Bool
    public var httpOnly: Bool
    /// true: sent to `domain` only; false: to `domain` and its subdomains.
    public var hostOnly: Bool

    public init(name: String, value: String, domain: String, path: String = "/", expires: Int64? = nil,
                secure: Bool = false, httpOnly: Bool = false, hostOnly: Bool = true) {
        self.name = name
        self.value = value
        self.domain = Cookie.normalizedDomain(domain)
        self.path = path
        self.expires = expires
        self.secure = secure
        self.httpOnly = httpOnly
        self.hostOnly = hostOnly
    }

    /// A session cookie lives as long as the daemon; only persistent ones are written out.
    public var isPersistent: Bool { expires != nil }

    /// libcurl drops a cookie once its expiry is in the past (`expires < now`).
    public func isExpired(now: Int64) -> Bool {
        guard let expires else { return false }
        return expires < now
    }

    /// Two cookies with the same name, domain (and scope) and path are the same cookie:
    /// a newer one replaces the older.
    func sameIdentity(as other: Cookie) -> Bool {
        name == other.name && domain == other.domain && path == other.path && hostOnly == other.hostOnly
    }

    /// Lowercase, without leading dots (".example.com" is how cookies.txt marks a domain cookie).
    public static func normalizedDomain(_ domain: String) -> String {
        var d = Substring(domain.lowercased())
        while d.hasPrefix(".") { d = d.dropFirst() }
        return String(d)
    }
}

// MARK: Netscape cookies.txt lines

extension Cookie {
    /// curl's longest cookie line (lib/cookie.c MAX_COOKIE_LINE); longer lines are refused.
    public static let maxLineBytes = 5000

    /// Why a cookies.txt line is not a cookie.
    public struct LineProblem: Error, Sendable, Equatable, CustomStringConvertible {
        public let description: String
    }

    /// Reads one line of a Netscape cookies.txt file (as curl and wget write it):
    /// `[#HttpOnly_]domain \t includeSubdomains \t path \t secure \t expires \t name \t value`.
    /// Returns nil for blank lines and comments; throws for a line that is neither.
    public static func parse(netscapeLine raw: Substring) throws(LineProblem) -> Cookie? {
        var line = raw
        while let last = line.last, last.isNewline { line = line.dropLast() }  // "\r\n" is one Character
        if line.allSatisfy({ $0 == " " || $0 == "\t" }) { return nil }
        guard line.utf8.count <= maxLineBytes else {
            throw LineProblem(description: "longer than \(maxLineBytes) bytes")
        }
        var httpOnly = false
        if line.hasPrefix(httpOnlyPrefix) {
            httpOnly = true
            line = line.dropFirst(httpOnlyPrefix.count)
        } else if line.hasPrefix("#") {
            return nil
        }
        var fields = line.split(separator: "\t", omittingEmptySubsequences: false)
        // curl accepts a cookie with no value at all (six fields) as an empty value.
        if fields.count == 6 { fields.append("") }
        guard fields.count == 7 else {
            throw LineProblem(description: "expected 7 tab-separated fields, found \(fields.count)")
        }
        let domain = normalizedDomain(String(fields[0]))
        guard !domain.isEmpty, !domain.contains(where: { $0 == " " || $0 == ";" }) else {
            throw LineProblem(description: "bad domain \"\(fields[0])\"")
        }
        guard let includeSubdomains = flag(fields[1]) else {
            throw LineProblem(description: "include-subdomains flag must be TRUE or FALSE, got \"\(fields[1])\"")
        }
        guard fields[2].hasPrefix("/") else {
            throw LineProblem(description: "path must start with \"/\", got \"\(fields[2])\"")
        }
        guard let secure = flag(fields[3]) else {
            throw LineProblem(description: "secure flag must be TRUE or FALSE, got \"\(fields[3])\"")
        }
        guard let expires = Int64(fields[4]), expires >= 0 else {
            throw LineProblem(description: "expiry must be unix seconds, got \"\(fields[4])\"")
        }
        guard !fields[5].isEmpty else { throw LineProblem(description: "empty cookie name") }
        return Cookie(
            name: String(fields[5]), value: String(fields[6]), domain: domain, path: String(fields[2]),
            expires: expires == 0 ? nil : expires, secure: secure, httpOnly: httpOnly,
            hostOnly: !includeSubdomains)
    }

    /// The cookie as one cookies.txt line (no newline), exactly as libcurl writes it.
    public var netscapeLine: String {
        let fields = [
            (httpOnly ? Self.httpOnlyPrefix : "") + (hostOnly ? "" : ".") + domain,
            hostOnly ? "FALSE" : "TRUE",
            path,
            secure ? "TRUE" : "FALSE",
            String(expires ?? 0),
            name,
            value,
        ]
        return fields.joined(separator: "\t")
    }

    private static let httpOnlyPrefix = "#HttpOnly_"

    private static func flag(_ text: Substring) -> Bool? {
        switch text.uppercased() {
        case "TRUE": true
        case "FALSE": false
        default: nil
        }
    }
}
