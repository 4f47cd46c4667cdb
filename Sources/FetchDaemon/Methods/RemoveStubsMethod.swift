import JSONRPC

/// `removeStubs {set?, stubId?}` -> `{removed}`: one stub, a set's stubs, or every stub.
struct RemoveStubsMethod: InlineRPCMethod {
    static let name = "removeStubs"

    let stubs: StubStore

    func callInline(_ params: JSONValue?, context: RPCContext) throws -> JSONValue {
        var reader = try ParamReader(params)
        let set = try reader.string("set")
        let id = try reader.string("stubId")
        try reader.finish()
        return ["removed": JSONValue(stubs.remove(set: set, stubID: id))]
    }
}
