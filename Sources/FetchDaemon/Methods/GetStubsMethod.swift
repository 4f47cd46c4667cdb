import JSONRPC

/// `getStubs {set?}` -> `{stubs: [{stubId, set, match, hits}], misses: [{set, method, url,
/// nearest}]}`: the stubs in the order they are tried, and the last 100 misses (of that set
/// when one is named), oldest first.
struct GetStubsMethod: InlineRPCMethod {
    static let name = "getStubs"

    let stubs: StubStore

    func callInline(_ params: JSONValue?, context: RPCContext) throws -> JSONValue {
        var reader = try ParamReader(params)
        let set = try reader.string("set")
        try reader.finish()
        let (list, misses) = stubs.snapshot(set: set)
        return [
            "stubs": .array(list.map { stub in
                ["stubId": .string(stub.id), "set": .string(stub.set), "match": .object(stub.match.given), "hits": JSONValue(stub.hits)]
            }),
            "misses": .array(misses.filter { set == nil || $0.set == set }.map(\.json)),
        ]
    }
}
