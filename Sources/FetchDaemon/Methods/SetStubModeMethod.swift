import JSONRPC

/// `setStubMode {set, onMiss: "error" | "network"}` -> `{set, onMiss}`: what a request that no
/// stub of the set matches gets (`--offline` makes every miss an error whatever this says).
struct SetStubModeMethod: InlineRPCMethod {
    static let name = "setStubMode"

    let stubs: StubStore

    func callInline(_ params: JSONValue?, context: RPCContext) throws -> JSONValue {
        var reader = try ParamReader(params)
        let set = try reader.requiredString("set")
        let text = try reader.requiredString("onMiss")
        guard let mode = StubStore.OnMiss(rawValue: text) else {
            throw RPCError.invalidParams(field: "onMiss", "expected one of \(StubStore.OnMiss.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        try reader.finish()
        stubs.setMode(mode, for: set)
        return ["set": .string(set), "onMiss": .string(mode.rawValue)]
    }
}
