import JSONRPC

/// `purgeCache {url? | urlPrefix?}` -> `{removed}`: every stored response of one URL (all
/// its variants and credentials), of the URLs that start with a prefix, or (neither) all of
/// them. The index and the files are changed on the blocking threads.
struct PurgeCacheMethod: ReplyingRPCMethod {
    static let name = "purgeCache"

    let cache: HTTPCache?

    func start(_ params: JSONValue?, context: RPCContext, reply: @escaping Reply) throws {
        var reader = try ParamReader(params)
        let url = try reader.string("url")
        let prefix = try reader.string("urlPrefix")
        if url != nil && prefix != nil {
            throw RPCError.invalidParams(field: reader.field("urlPrefix"), "give url or urlPrefix, not both")
        }
        try reader.finish()
        guard let cache else { throw CacheError.disabled }
        let primary = url.map(CacheRules.primaryKey)
        cache.notePurge(url: primary, prefix: prefix)
        cache.blocking.execute {
            reply(Result {
                do {
                    let removed = try cache.store.purge(url: primary, prefix: prefix)
                    return ["removed": JSONValue(removed)]
                } catch {
                    throw CacheError.store(path: cache.store.directory + "/index.sqlite", detail: String(describing: error))
                }
            })
        }
    }
}
