import FoundationEssentials

/// `--redis URL`: `redis://[[user]:password@]host[:port][/db]` or
/// `unix:///path[?db=N&user=U&password=P]`, read as redis-cli reads them: a user name (an ACL
/// user, Redis 6 and later) is sent with the password (`AUTH user password`); a password alone,
/// or one after an empty user name, goes alone (`AUTH password`: the `default` user). The
/// password is kept for AUTH and never printed: `description` leaves it out.
struct RedisURL: Sendable, Equatable, CustomStringConvertible {
    enum Endpoint: Sendable, Equatable {
        case tcp(host: String, port: Int)
        case unix(path: String)
    }

    let endpoint: Endpoint
    let database: Int
    /// The ACL user to authenticate as; nil: the `default` user (AUTH with the password alone).
    let user: String?
    let password: String?

    struct Invalid: Error, CustomStringConvertible {
        let description: String
    }

    init(_ text: String) throws(Invalid) {
        if text.hasPrefix("unix://") {
            let rest = text.dropFirst("unix://".count)
            let parts = rest.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
            let path = String(parts[0])
            guard path.hasPrefix("/") else { throw Invalid(description: "--redis unix:// needs an absolute path, as unix:///run/redis.sock") }
            var database = 0
            var user: String? = nil
            var password: String? = nil
            if parts.count == 2 {
                for pair in parts[1].split(separator: "&") {
                    let kv = pair.split(separator: "=", maxSplits: 1).map(String.init)
                    guard kv.count == 2 else { throw Invalid(description: "--redis: expected key=value after ?") }
                    switch kv[0] {
                    case "db":
                        guard let n = Int(kv[1]), n >= 0 else { throw Invalid(description: "--redis: db must be a whole number") }
                        database = n
                    case "user": user = Self.percentDecoded(kv[1])
                    case "password": password = Self.percentDecoded(kv[1])
                    default: throw Invalid(description: "--redis: unknown setting \(kv[0]) (db, user, password)")
                    }
                }
            }
            self.init(endpoint: .unix(path: path), database: database, user: user, password: password)
            return
        }
        guard text.hasPrefix("redis://") else { throw Invalid(description: "--redis takes redis://host:port/db or unix:///path") }
        var rest = Substring(text.dropFirst("redis://".count))
        var user: String? = nil
        var password: String? = nil
        if let at = rest.lastIndex(of: "@") {
            let userinfo = rest[..<at]
            rest = rest[rest.index(after: at)...]
            if let colon = userinfo.firstIndex(of: ":") {
                user = Self.percentDecoded(String(userinfo[..<colon]))
                password = Self.percentDecoded(String(userinfo[userinfo.index(after: colon)...]))
            } else if !userinfo.isEmpty {
                password = Self.percentDecoded(String(userinfo))
            }
        }
        var database = 0
        if let slash = rest.firstIndex(of: "/") {
            let db = rest[rest.index(after: slash)...]
            rest = rest[..<slash]
            if !db.isEmpty {
                guard let n = Int(db), n >= 0 else { throw Invalid(description: "--redis: the database after / must be a whole number") }
                database = n
            }
        }
        var host = String(rest)
        var port = 6379
        if host.hasPrefix("[") , let close = host.firstIndex(of: "]") {
            let after = host[host.index(after: close)...]
            if after.hasPrefix(":") {
                guard let p = Int(after.dropFirst()), (1...65535).contains(p) else { throw Invalid(description: "--redis: bad port") }
                port = p
            }
            host = String(host[host.index(after: host.startIndex)..<close])
        } else if let colon = host.lastIndex(of: ":") {
            guard let p = Int(host[host.index(after: colon)...]), (1...65535).contains(p) else { throw Invalid(description: "--redis: bad port") }
            port = p
            host = String(host[..<colon])
        }
        guard !host.isEmpty else { throw Invalid(description: "--redis: no host in the URL") }
        self.init(endpoint: .tcp(host: host, port: port), database: database, user: user, password: password)
    }

    init(endpoint: Endpoint, database: Int, user: String? = nil, password: String?) {
        self.endpoint = endpoint
        self.database = database
        // An empty user name is none (redis-cli's `redis://:password@host`).
        self.user = user?.isEmpty == false ? user : nil
        self.password = password
    }

    /// The AUTH command for this URL, or nil when it gives no password.
    var authCommand: [String]? {
        guard let password else { return nil }
        if let user { return ["AUTH", user, password] }
        return ["AUTH", password]
    }

    /// The URL without its password (the user name is shown).
    var description: String {
        let shownUser = user.map(Self.percentEncoded) ?? ""
        let auth = password == nil ? (user == nil ? "" : "\(shownUser)@") : "\(shownUser):***@"
        switch endpoint {
        case .tcp(let host, let port):
            let shown = host.contains(":") ? "[\(host)]" : host
            return "redis://\(auth)\(shown):\(port)/\(database)"
        case .unix(let path):
            let user = self.user.map { " (user \(Self.percentEncoded($0))" + (password == nil ? ")" : ", with a password)") }
            return "unix://\(path)" + (database == 0 ? "" : "?db=\(database)")
                + (user ?? (password == nil ? "" : " (with a password)"))
        }
    }

    /// A user name as it can be shown in a URL: anything but letters, digits and `-._~` as %XX.
    private static func percentEncoded(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                out += "%" + (byte < 16 ? "0" : "") + String(byte, radix: 16, uppercase: true)
            }
        }
        return out
    }

    private static func percentDecoded(_ text: String) -> String {
        var bytes: [UInt8] = []
        var utf8 = Array(text.utf8)[...]
        while let byte = utf8.popFirst() {
            if byte == UInt8(ascii: "%"), utf8.count >= 2,
               let value = UInt8(String(decoding: utf8.prefix(2), as: UTF8.self), radix: 16) {
                bytes.append(value)
                utf8 = utf8.dropFirst(2)
            } else {
                bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
