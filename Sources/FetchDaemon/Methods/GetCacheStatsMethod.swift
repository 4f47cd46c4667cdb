import JSONRPC

/// `getCacheStats` -> `{entries, bytes, maxBytes, hits, misses, revalidated, collapsed, stale,
/// bypassed, directory}`: what the HTTP cache holds and what it did since the daemon started
/// (counts of jobs by their result's `cache`). Answered from memory, inline. Without a cache:
/// -32004 (CacheError.disabled).
struct GetCacheStatsMethod: InlineRPCMethod {
    static let name = "getCacheStats"

    let cache: HTTPCache?

    func callInline(_ params: JSONValue?, context: RPCContext) throws -> JSONValue {
        let reader = try ParamReader(params)
        try reader.finish()
        guard let cache else { throw CacheError.disabled }
        let (counts, entries, bytes) = cache.stats
        return [
            "entries": JSONValue(entries), "bytes": .integer(bytes), "maxBytes": .integer(cache.store.maxBytes),
            "hits": JSONValue(counts.hits), "misses": JSONValue(counts.misses), "revalidated": JSONValue(counts.revalidated),
            "collapsed": JSONValue(counts.collapsed), "stale": JSONValue(counts.stale), "bypassed": JSONValue(counts.bypassed),
            "directory": .string(cache.store.directory),
        ]
    }
}
