public import FoundationEssentials

/// What a server says of its request budget in an answer's headers, read as a pure function
/// (the wall clock is an argument, for a reset given as a Unix time). The forms read:
///
/// - the IETF `RateLimit` field in its structured form, a list of policies each with its
///   remaining quota `r` and the seconds to its reset `t`: `RateLimit: "default";r=0;t=30`
///   (a policy without `t` resets within its window `w` of `RateLimit-Policy:
///   "default";q=100;w=60`), and the earlier drafts' dictionary, `RateLimit: limit=100,
///   remaining=0, reset=30`;
/// - the older separate fields `RateLimit-Remaining` and `RateLimit-Reset` (seconds);
/// - `X-RateLimit-Remaining` with `X-RateLimit-Reset`: seconds to wait, or a Unix time when
///   the number is above 10^9 (GitHub's);
/// - `x-ratelimit-remaining-requests` with `x-ratelimit-reset-requests`, a duration such as
///   `1s`, `6m0s` or `250ms` (OpenAI's).
///
/// With each, the window's whole quota when the server states it (`q` of the policy,
/// `limit`, `RateLimit-Limit`, `X-RateLimit-Limit`, `x-ratelimit-limit-requests`).
///
/// When an answer carries several, the one with the least remaining counts (the latest reset
/// among those that say the same). Malformed values are ignored, never an error.
public enum ServerRateLimit {
    public struct Budget: Sendable, Equatable {
        /// Requests the server will still take in its current window (never below 0).
        public var remaining: Int
        /// Seconds until the window resets; nil when the server did not say.
        public var resetSeconds: Double?
        /// The requests a whole window takes (the quota), when the server said.
        public var limit: Int?

        public init(remaining: Int, resetSeconds: Double?, limit: Int? = nil) {
            self.remaining = max(0, remaining)
            self.resetSeconds = resetSeconds
            self.limit = limit.flatMap { $0 > 0 ? $0 : nil }
        }

        /// The server will refuse requests until its reset.
        public var isSpent: Bool { remaining == 0 }
    }

    /// A number of `X-RateLimit-Reset` above this is a Unix time, not seconds to wait.
    public static let unixTimeAbove = 1e9

    /// The budget the headers state, or nil when they state none. Most answers carry none of
    /// these headers: they are recognized by the first bytes of their names, and nothing else
    /// is read or allocated for them (the clock is not read either).
    public static func read(_ headers: ResponseHeaders, now: @autoclosure () -> Date) -> Budget? {
        let found = relevantHeaders(headers)
        guard !found.isEmpty else { return nil }
        return budget(found, now: now())
    }

    /// The same from headers as `HTTPHeader`s (tests, stubs).
    public static func read(_ headers: [HTTPHeader], now: Date) -> Budget? {
        read(ResponseHeaders(headers), now: now)
    }

    // MARK: finding the headers

    private static let prefixes: [[UInt8]] = [Array("ratelimit".utf8), Array("x-ratelimit".utf8)]

    /// The headers whose names start with `ratelimit` or `x-ratelimit` (case-insensitively),
    /// names lower-cased; a field repeated is joined with ", " (a structured list may be split
    /// over several lines).
    static func relevantHeaders(_ headers: ResponseHeaders) -> [String: String] {
        var found: [String: String] = [:]
        headers.withFields { bytes, fields in
            for field in fields {
                let name = UnsafeBufferPointer(rebasing: bytes[field.name])
                guard name.count >= 9, let first = name.first, first | 0x20 == UInt8(ascii: "r") || first | 0x20 == UInt8(ascii: "x"),
                      prefixes.contains(where: { hasPrefix(name, $0) }) else { continue }
                let key = String(decoding: name.map { $0 >= 65 && $0 <= 90 ? $0 | 0x20 : $0 }, as: UTF8.self)
                let value = String(decoding: UnsafeBufferPointer(rebasing: bytes[field.value]), as: UTF8.self)
                found[key] = found[key].map { "\($0), \(value)" } ?? value
            }
        }
        return found
    }

    private static func hasPrefix(_ name: UnsafeBufferPointer<UInt8>, _ prefix: [UInt8]) -> Bool {
        guard name.count >= prefix.count else { return false }
        for index in 0..<prefix.count where name[index] | 0x20 != prefix[index] && name[index] != prefix[index] {
            return false
        }
        return true
    }

    // MARK: reading them

    static func budget(_ found: [String: String], now: Date) -> Budget? {
        var candidates: [Budget] = []
        if let field = found["ratelimit"] {
            candidates += ietf(field, policy: found["ratelimit-policy"])
        }
        if let remaining = found["ratelimit-remaining"].flatMap(integer) {
            candidates.append(Budget(remaining: remaining, resetSeconds: found["ratelimit-reset"].flatMap(seconds),
                                     limit: found["ratelimit-limit"].flatMap(integer)))
        }
        if let remaining = found["x-ratelimit-remaining"].flatMap(integer) {
            let reset = found["x-ratelimit-reset"].flatMap(seconds).map { value in
                value > unixTimeAbove ? max(0, value - now.timeIntervalSince1970) : value
            }
            candidates.append(Budget(remaining: remaining, resetSeconds: reset, limit: found["x-ratelimit-limit"].flatMap(integer)))
        }
        if let remaining = found["x-ratelimit-remaining-requests"].flatMap(integer) {
            candidates.append(Budget(remaining: remaining, resetSeconds: found["x-ratelimit-reset-requests"].flatMap(duration),
                                     limit: found["x-ratelimit-limit-requests"].flatMap(integer)))
        }
        return candidates.min { a, b in
            a.remaining != b.remaining ? a.remaining < b.remaining : (a.resetSeconds ?? -1) > (b.resetSeconds ?? -1)
        }
    }

    /// The IETF field: the structured list (`"name";r=R;t=T`, one item per policy), or the
    /// earlier drafts' dictionary (`limit=L, remaining=R, reset=T`).
    static func ietf(_ field: String, policy: String?) -> [Budget] {
        let members = StructuredList.parse(field)
        if members.contains(where: { $0.parameters["r"] != nil }) {
            let policies = Dictionary(StructuredList.parse(policy ?? "").map { ($0.item, $0.parameters) },
                                      uniquingKeysWith: { first, _ in first })
            return members.compactMap { member in
                guard let remaining = member.parameters["r"].flatMap(integer) else { return nil }
                let policy = policies[member.item]
                let reset = member.parameters["t"].flatMap(seconds) ?? policy?["w"].flatMap(seconds)
                return Budget(remaining: remaining, resetSeconds: reset, limit: policy?["q"].flatMap(integer))
            }
        }
        // The dictionary form: each member is `key=value`.
        var dictionary: [String: String] = [:]
        for member in members {
            let pair = member.item.split(separator: "=", maxSplits: 1)
            if pair.count == 2 { dictionary[pair[0].trimmingBlanks().lowercased()] = pair[1].trimmingBlanks() }
        }
        guard let remaining = dictionary["remaining"].flatMap(integer) else { return [] }
        return [Budget(remaining: remaining, resetSeconds: dictionary["reset"].flatMap(seconds),
                       limit: dictionary["limit"].flatMap(integer))]
    }

    // MARK: values

    /// A whole number (a sign allowed; a decimal is not a count).
    static func integer(_ text: String) -> Int? {
        Int(text.trimmingBlanks())
    }

    /// A number of seconds, whole or decimal, not negative.
    static func seconds(_ text: String) -> Double? {
        let trimmed = text.trimmingBlanks()
        guard let value = Double(trimmed), value.isFinite, value >= 0,
              trimmed.utf8.allSatisfy({ ($0 >= 48 && $0 <= 57) || $0 == UInt8(ascii: ".") }) else { return nil }
        return value
    }

    /// A duration as Go writes one (`1s`, `6m0s`, `1h2m3.5s`, `250ms`, `20us`), or a plain
    /// number of seconds.
    public static func duration(_ text: String) -> Double? {
        let trimmed = text.trimmingBlanks()
        if let plain = seconds(trimmed) { return plain }
        var total = 0.0
        var rest = Substring(trimmed)
        guard !rest.isEmpty else { return nil }
        while !rest.isEmpty {
            let number = rest.prefix { $0.isASCII && ($0.isNumber || $0 == ".") }
            guard !number.isEmpty, let value = Double(number) else { return nil }
            rest = rest.dropFirst(number.count)
            let unit = rest.prefix { !($0.isASCII && ($0.isNumber || $0 == ".")) }
            rest = rest.dropFirst(unit.count)
            switch unit {
            case "h": total += value * 3600
            case "m": total += value * 60
            case "s": total += value
            case "ms": total += value / 1e3
            case "us", "µs", "μs": total += value / 1e6
            case "ns": total += value / 1e9
            default: return nil
            }
        }
        return total
    }
}

/// Just enough of RFC 8941's structured fields for the rate limit fields: a list of members,
/// each a bare item (a string or a token, kept as its text) with `;key=value` parameters
/// (values kept as text, strings unquoted). Anything it cannot read is skipped.
enum StructuredList {
    struct Member: Equatable {
        var item: String
        var parameters: [String: String]
    }

    static func parse(_ text: String) -> [Member] {
        split(text, at: ",").compactMap { member in
            let parts = split(member, at: ";")
            guard let first = parts.first else { return nil }
            var parameters: [String: String] = [:]
            for part in parts.dropFirst() {
                let pair = part.split(separator: "=", maxSplits: 1)
                guard let key = pair.first.map({ $0.trimmingBlanks().lowercased() }), !key.isEmpty else { continue }
                parameters[key] = pair.count == 2 ? unquoted(pair[1].trimmingBlanks()) : "?1"
            }
            return Member(item: unquoted(first.trimmingBlanks()), parameters: parameters)
        }
    }

    /// Splits at `separator` outside quoted strings.
    private static func split(_ text: String, at separator: Character) -> [String] {
        var parts: [String] = []
        var current = ""
        var quoted = false, escaped = false
        for character in text {
            if quoted {
                if escaped { escaped = false } else if character == "\\" { escaped = true } else if character == "\"" { quoted = false }
                current.append(character)
            } else if character == "\"" {
                quoted = true
                current.append(character)
            } else if character == separator {
                parts.append(current)
                current = ""
            } else {
                current.append(character)
            }
        }
        parts.append(current)
        return parts.filter { !$0.trimmingBlanks().isEmpty }
    }

    private static func unquoted(_ text: String) -> String {
        guard text.count >= 2, text.hasPrefix("\""), text.hasSuffix("\"") else { return text }
        var out = ""
        var escaped = false
        for character in text.dropFirst().dropLast() {
            if escaped { out.append(character); escaped = false } else if character == "\\" { escaped = true } else { out.append(character) }
        }
        return out
    }
}
