import FoundationEssentials
import JSONRPC

extension JobReport {
    /// HAR's cache object: what the cache did (`comment`), and the stored response it used
    /// (`_storedAt`, `_eTag`, `_expires` as HAR's beforeRequest would name them).
    var harCache: JSONObject? {
        guard let cache else { return nil }
        var object: JSONObject = ["comment": .string(cache.rawValue)]
        if let stored = cacheEntry {
            let expires = stored.responseTime + CacheRules.freshnessLifetime(stored)
                - CacheRules.currentAge(stored, now: stored.responseTime)
            object["_storedAt"] = .string(ISO8601Format.string(Date(timeIntervalSince1970: stored.responseTime)))
            object["_expires"] = .string(ISO8601Format.string(Date(timeIntervalSince1970: expires)))
            if let etag = stored.etag { object["_eTag"] = .string(etag) }
        }
        return object
    }
}
