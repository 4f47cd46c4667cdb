import CLinux
import FetchEngine

/// The request's `cache` field: the WHATWG fetch cache modes (protocol.md, "Cache").
enum CacheMode: String, Sendable, CaseIterable {
    case `default`
    case noStore = "no-store"
    case reload
    case noCache = "no-cache"
    case forceCache = "force-cache"
    case onlyIfCached = "only-if-cached"
}

/// What the cache did for a job (the result's `cache` field).
enum CacheOutcome: String, Sendable {
    case hit, miss, revalidated, stale, collapsed, bypass
}

/// Cache-Control directives of one message (every Cache-Control field line, joined), names
/// lowercased, values unquoted. A directive given twice keeps its first value and is marked
/// `conflicting` when the values differ (RFC 9111 4.2.1: the response is then stale).
struct CacheControl: Equatable, Sendable {
    private(set) var directives: [String: String] = [:]
    private(set) var conflicting: Set<String> = []

    init(_ headers: [HTTPHeader], field: String = "Cache-Control") {
        for header in headers where header.name.caseInsensitiveEquals(field) {
            for part in Self.split(header.value) {
                let (name, value) = Self.directive(part)
                guard !name.isEmpty else { continue }
                if let old = directives[name] {
                    if old != value { conflicting.insert(name) }
                } else {
                    directives[name] = value
                }
            }
        }
    }

    func has(_ name: String) -> Bool { directives[name] != nil }

    /// A delta-seconds directive (RFC 9111 1.2.2): nil when absent; 0 when invalid or
    /// conflicting (treated as stale); values past 2^31 are 2^31.
    func seconds(_ name: String) -> Double? {
        guard let value = directives[name] else { return nil }
        guard !conflicting.contains(name), !value.isEmpty,
              value.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else { return 0 }
        return min(Double(value) ?? 2_147_483_648, 2_147_483_648)
    }

    /// Commas outside quoted strings separate directives.
    private static func split(_ text: String) -> [Substring] {
        var parts: [Substring] = []
        var start = text.startIndex
        var quoted = false
        var index = text.startIndex
        while index < text.endIndex {
            let c = text[index]
            if c == "\"" { quoted.toggle() } else if c == "\\" && quoted {
                index = text.index(after: index)
                if index == text.endIndex { break }
            } else if c == "," && !quoted {
                parts.append(text[start..<index])
                start = text.index(after: index)
            }
            index = text.index(after: index)
        }
        parts.append(text[start...])
        return parts
    }

    private static func directive(_ part: Substring) -> (String, String) {
        let trimmed = String(part).trimmingBlanks()
        guard let equals = trimmed.firstIndex(of: "=") else { return (trimmed.lowercased(), "") }
        let name = String(trimmed[..<equals]).trimmingBlanks().lowercased()
        var value = String(trimmed[trimmed.index(after: equals)...]).trimmingBlanks()
        if value.count >= 2, value.first == "\"", value.last == "\"" {
            var unquoted = ""
            var escaped = false
            for c in value.dropFirst().dropLast() {
                if c == "\\" && !escaped { escaped = true; continue }
                escaped = false
                unquoted.append(c)
            }
            value = unquoted
        }
        return (name, value)
    }
}

/// A response as the cache keeps it: what RFC 9111's rules need, times in seconds since 1970.
struct StoredResponse: Equatable, Sendable {
    var status: Int
    var headers: [HTTPHeader]
    /// When the request that got it was sent, and when its answer came (4.2.3's request_time
    /// and response_time).
    var requestTime: Double
    var responseTime: Double

    var etag: String? { headers.last(named: "ETag") }
    var lastModified: String? { headers.last(named: "Last-Modified") }
    var hasValidator: Bool { etag != nil || lastModified != nil }
}

/// RFC 9111 for a private cache, as pure functions of headers, times and the clock (`now`,
/// seconds since 1970): what may be stored, how long it is fresh, its age, whether a stored
/// response may answer a request, the conditional request that validates it, what a 304
/// changes, and what an unsafe method invalidates. No I/O: `CacheRulesTests` drive it.
enum CacheRules {
    /// Status codes a cache understands and may store (RFC 9110 15): every final status but
    /// 206 (fetchd does not combine partial content) and 304 (it updates, it is not stored).
    static func understood(_ status: Int) -> Bool {
        (200...599).contains(status) && status != 206 && status != 304
    }

    /// RFC 9110 15.1: statuses whose answers are heuristically cacheable (206 left out, see above).
    static let heuristicallyCacheable: Set<Int> = [200, 203, 204, 300, 301, 308, 404, 405, 410, 414, 501]

    /// Hop-by-hop fields and others a cache neither stores nor updates (RFC 9111 3.1, 3.2).
    static let notStored: Set<String> = ["connection", "keep-alive", "proxy-connection", "te", "transfer-encoding",
                                         "upgrade", "trailer", "proxy-authenticate", "proxy-authentication-info"]
    /// Never taken from a 304 (3.2): the stored body's own framing and coding.
    static let notUpdated: Set<String> = ["content-length", "content-encoding", "content-range", "content-type"]

    /// RFC 9111 3: may this answer to a GET be stored by a private cache?
    static func storable(status: Int, requestHeaders: [HTTPHeader], responseHeaders: [HTTPHeader]) -> Bool {
        let response = CacheControl(responseHeaders)
        let request = CacheControl(requestHeaders)
        guard (200...599).contains(status) else { return false }
        if response.has("must-understand") {
            // 5.2.2.3: stored only when the status is understood; no-store then does not apply.
            guard understood(status) else { return false }
        } else {
            guard understood(status), !response.has("no-store") else { return false }
        }
        if request.has("no-store") { return false }
        // `private` is allowed (a private cache); s-maxage and `public` are for shared caches,
        // though `public` still makes the answer heuristically cacheable (4.2.2).
        return response.has("public") || response.has("private") || responseHeaders.last(named: "Expires") != nil
            || response.seconds("max-age") != nil || heuristicallyCacheable.contains(status)
    }

    /// An answer is worth keeping only when it may ever be reused without a full transfer:
    /// some freshness, a validator, or stale-if-error.
    static func worthStoring(_ stored: StoredResponse) -> Bool {
        freshnessLifetime(stored) > 0 || stored.hasValidator
            || CacheControl(stored.headers).seconds("stale-if-error") != nil
    }

    static func date(_ text: String?) -> Double? {
        guard let text else { return nil }
        let seconds = fetchd_parse_http_date(text.trimmingBlanks())
        return seconds == -1 ? nil : Double(seconds)
    }

    /// RFC 9111 4.2.1: max-age, else Expires - Date, else 10% of Date - Last-Modified for a
    /// heuristically cacheable status (4.2.2); s-maxage is ignored (a private cache).
    static func freshnessLifetime(_ stored: StoredResponse) -> Double {
        let cc = CacheControl(stored.headers)
        if let maxAge = cc.seconds("max-age") { return maxAge }
        let dateValue = date(stored.headers.last(named: "Date")) ?? stored.responseTime
        let expiresFields = stored.headers.filter { $0.name.caseInsensitiveEquals("Expires") }
        if let expires = expiresFields.first {
            // An invalid date ("0") or two different Expires: already expired (5.3).
            guard expiresFields.allSatisfy({ $0.value == expires.value }), let when = date(expires.value) else { return 0 }
            return max(0, when - dateValue)
        }
        if heuristicallyCacheable.contains(stored.status) || cc.has("public"),
           let modified = date(stored.lastModified), modified < dateValue {
            return (dateValue - modified) / 10
        }
        return 0
    }

    /// RFC 9111 4.2.3: the response's current age at `now`.
    static func currentAge(_ stored: StoredResponse, now: Double) -> Double {
        let dateValue = date(stored.headers.last(named: "Date")) ?? stored.responseTime
        let ageText = stored.headers.first(where: { $0.name.caseInsensitiveEquals("Age") })?.value.trimmingBlanks() ?? ""
        let ageValue = ageText.isEmpty || !ageText.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) ? 0
            : min(Double(ageText) ?? 2_147_483_648, 2_147_483_648)
        let apparentAge = max(0, stored.responseTime - dateValue)
        let responseDelay = max(0, stored.responseTime - stored.requestTime)
        let correctedAgeValue = ageValue + responseDelay
        let correctedInitialAge = max(apparentAge, correctedAgeValue)
        let residentTime = max(0, now - stored.responseTime)
        return correctedInitialAge + residentTime
    }

    /// The request's own directives (5.2.1), and Pragma: no-cache without Cache-Control (5.4).
    struct RequestDirectives: Equatable, Sendable {
        var noStore = false
        var noCache = false
        var maxAge: Double?
        var maxStale: Double?
        var minFresh: Double?
        var onlyIfCached = false
        var staleIfError: Double?

        init(_ headers: [HTTPHeader]) {
            let cc = CacheControl(headers)
            noStore = cc.has("no-store")
            noCache = cc.has("no-cache")
                || (!headers.contains { $0.name.caseInsensitiveEquals("Cache-Control") }
                    && headers.contains { $0.name.caseInsensitiveEquals("Pragma") && $0.value.lowercased().contains("no-cache") })
            maxAge = cc.seconds("max-age")
            if let value = cc.directives["max-stale"] { maxStale = value.isEmpty ? .infinity : cc.seconds("max-stale") }
            minFresh = cc.seconds("min-fresh")
            onlyIfCached = cc.has("only-if-cached")
            staleIfError = cc.seconds("stale-if-error")
        }
    }

    /// How a stored response may answer a request.
    enum Reuse: Equatable, Sendable {
        /// Fresh enough: the answer, with no request (`hit`).
        case fresh
        /// Stale but allowed (max-stale, force-cache, only-if-cached): the answer (`stale`).
        case stale
        /// Stale within stale-while-revalidate: the answer now, one revalidation in the background.
        case staleWhileRevalidate
        /// It must be validated first: a conditional request (`revalidated` on a 304).
        case validate
    }

    static func reuse(_ stored: StoredResponse, mode: CacheMode, requestHeaders: [HTTPHeader], now: Double) -> Reuse {
        let cc = CacheControl(stored.headers)
        let request = RequestDirectives(requestHeaders)
        let lifetime = freshnessLifetime(stored)
        let age = currentAge(stored, now: now)
        // no-cache, and must-revalidate once stale, are never overridden (4.2.4; 5.2.2.2).
        let mustValidateWhenStale = cc.has("must-revalidate")
        if cc.has("no-cache") { return .validate }
        let fresh = lifetime > age
        switch mode {
        case .forceCache, .onlyIfCached:
            return fresh ? .fresh : (mustValidateWhenStale ? .validate : .stale)
        case .noCache, .reload, .noStore:
            return .validate
        case .default:
            break
        }
        if request.noCache { return .validate }
        if let maxAge = request.maxAge, age > maxAge { return .validate }
        if let minFresh = request.minFresh, lifetime - age < minFresh { return .validate }
        if fresh { return .fresh }
        if mustValidateWhenStale { return .validate }
        let staleness = age - lifetime
        if let maxStale = request.maxStale, staleness <= maxStale { return .stale }
        if let window = cc.seconds("stale-while-revalidate"), staleness <= window { return .staleWhileRevalidate }
        return .validate
    }

    /// RFC 5861 4 / RFC 9111 4.2.4: after a failed validation (no answer, or 500, 502, 503,
    /// 504), may the stale response be used?
    static func mayServeOnError(_ stored: StoredResponse, requestHeaders: [HTTPHeader], now: Double) -> Bool {
        let cc = CacheControl(stored.headers)
        guard !cc.has("must-revalidate"), !cc.has("no-cache") else { return false }
        guard let window = RequestDirectives(requestHeaders).staleIfError ?? cc.seconds("stale-if-error") else { return false }
        return currentAge(stored, now: now) - freshnessLifetime(stored) <= window
    }

    static func isErrorForStaleIfError(_ status: Int) -> Bool { [500, 502, 503, 504].contains(status) }

    /// The validators a conditional request carries (RFC 9111 4.3.1).
    static func conditionalHeaders(for stored: StoredResponse) -> [HTTPHeader] {
        var headers: [HTTPHeader] = []
        if let etag = stored.etag { headers.append(HTTPHeader("If-None-Match", etag)) }
        if let modified = stored.lastModified { headers.append(HTTPHeader("If-Modified-Since", modified)) }
        return headers
    }

    /// Whether a 304 answers for this stored response (4.3.4): a strong ETag must match,
    /// else Last-Modified, else it is taken as the one validated.
    static func notModifiedMatches(_ stored: StoredResponse, _ notModified: [HTTPHeader]) -> Bool {
        if let etag = notModified.last(named: "ETag") {
            guard let mine = stored.etag else { return false }
            return weakStripped(etag) == weakStripped(mine)
        }
        if let modified = notModified.last(named: "Last-Modified"), let mine = stored.lastModified {
            return date(modified) == date(mine)
        }
        return true
    }

    private static func weakStripped(_ tag: String) -> String {
        let t = tag.trimmingBlanks()
        return t.hasPrefix("W/") ? String(t.dropFirst(2)) : t
    }

    /// The stored response freshened by a 304 (3.2): each field the 304 carries replaces the
    /// stored ones of that name, except the body's own framing and hop-by-hop fields; the
    /// request and response times are the validation's (so its Date and Age count).
    static func updated(_ stored: StoredResponse, with notModified: [HTTPHeader], requestTime: Double,
                        responseTime: Double) -> StoredResponse {
        let replaced = Set(notModified.map { $0.name.lowercased() }).subtracting(notUpdated).subtracting(notStored)
        var headers = stored.headers.filter { !replaced.contains($0.name.lowercased()) }
        headers += notModified.filter { replaced.contains($0.name.lowercased()) }
        // An Age the 304 does not repeat no longer holds: the stored one was the old answer's.
        if !replaced.contains("age") { headers.removeAll { $0.name.caseInsensitiveEquals("Age") } }
        return StoredResponse(status: stored.status, headers: headers, requestTime: requestTime, responseTime: responseTime)
    }

    /// The fields kept when a response is stored (3.1).
    static func storedHeaders(_ headers: [HTTPHeader]) -> [HTTPHeader] {
        headers.filter { !notStored.contains($0.name.lowercased()) }
    }

    // MARK: Vary (4.1)

    /// The request fields a response varies on, lowercased; nil for `Vary: *` (never matches).
    static func varyNames(_ responseHeaders: [HTTPHeader]) -> [String]? {
        var names: [String] = []
        for header in responseHeaders where header.name.caseInsensitiveEquals("Vary") {
            for part in header.value.split(separator: ",") {
                let name = String(part).trimmingBlanks().lowercased()
                if name == "*" { return nil }
                if !name.isEmpty, !names.contains(name) { names.append(name) }
            }
        }
        return names.sorted()
    }

    /// The request's values of those fields, normalised (lines combined, blanks around commas
    /// dropped): equal keys match (4.1). A field the request lacks matches only its absence.
    /// Kept as a digest (the fields may be credentials: `Vary: Authorization`, an API key
    /// header), so the index never holds a request's secret; "" when nothing varies.
    static func varyKey(names: [String], requestHeaders: [HTTPHeader]) -> String {
        guard !names.isEmpty else { return "" }
        var digest = SHA256()
        digest.update(Array(varyText(names: names, requestHeaders: requestHeaders).utf8))
        return digest.finishHex()
    }

    private static func varyText(names: [String], requestHeaders: [HTTPHeader]) -> String {
        var key = ""
        for name in names {
            let values = requestHeaders.filter { $0.name.caseInsensitiveEquals(name) }.map { $0.value }
            key += name
            if values.isEmpty {
                key += "\u{0}\n"
                continue
            }
            let joined = values.joined(separator: ",").split(separator: ",", omittingEmptySubsequences: false)
                .map { String($0).trimmingBlanks() }.joined(separator: ",")
            key += ":" + joined + "\n"
        }
        return key
    }

    // MARK: invalidation (4.4)

    static let safeMethods: Set<String> = ["GET", "HEAD", "OPTIONS", "TRACE"]

    /// The URLs a response to an unsafe method invalidates: the request's, and the Location
    /// and Content-Location of the same origin, for a non-error status.
    static func invalidated(method: String, status: Int, url: String, responseHeaders: [HTTPHeader]) -> [String] {
        guard !safeMethods.contains(method.uppercased()), (200...399).contains(status) else { return [] }
        var urls = [primaryKey(url)]
        guard let origin = try? RequestURL(url) else { return urls }
        for name in ["Location", "Content-Location"] {
            guard let reference = responseHeaders.last(named: name),
                  let resolved = RequestURL.resolve(reference, against: url),
                  let target = try? RequestURL(resolved),
                  target.scheme == origin.scheme, target.host.lowercased() == origin.host.lowercased(),
                  target.port == origin.port else { continue }
            let key = primaryKey(resolved)
            if !urls.contains(key) { urls.append(key) }
        }
        return urls
    }

    /// The URL a response is stored under: the request's, without its fragment.
    static func primaryKey(_ url: String) -> String {
        url.firstIndex(of: "#").map { String(url[..<$0]) } ?? url
    }

    /// WHATWG fetch's header additions for a mode ("HTTP-network-or-cache fetch", 8.x):
    /// no-store and reload ask intermediaries for a new answer, no-cache for validation.
    static func modeHeaders(_ mode: CacheMode, existing: [HTTPHeader]) -> [HTTPHeader] {
        let hasCC = existing.contains { $0.name.caseInsensitiveEquals("Cache-Control") }
        let hasPragma = existing.contains { $0.name.caseInsensitiveEquals("Pragma") }
        switch mode {
        case .noStore, .reload:
            return (hasPragma ? [] : [HTTPHeader("Pragma", "no-cache")]) + (hasCC ? [] : [HTTPHeader("Cache-Control", "no-cache")])
        case .noCache:
            return hasCC ? [] : [HTTPHeader("Cache-Control", "max-age=0")]
        case .default, .forceCache, .onlyIfCached:
            return []
        }
    }

    /// Request fields that make the request the client's own conditional or partial one: the
    /// cache neither answers nor stores it (WHATWG fetch: mode becomes no-store).
    static let conditionalFields = ["If-Modified-Since", "If-None-Match", "If-Unmodified-Since", "If-Match", "If-Range", "Range"]
}
