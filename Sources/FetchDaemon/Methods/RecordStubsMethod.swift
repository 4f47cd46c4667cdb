import JSONRPC

/// `recordStubs {set, har}` -> `{set, har}`: from now on a request naming the set that no stub
/// matches goes to the network, and what comes back is added to the set and to the HAR file
/// `har` (started afresh now; -32003 when it can't be written). Runs in a task: the file is
/// written now.
struct RecordStubsMethod: RPCMethod {
    static let name = "recordStubs"

    let stubs: StubStore
    let policy: FilePolicy
    let log: Logger

    func call(_ params: JSONValue?, context: RPCContext) async throws -> JSONValue {
        let (set, path) = try StubParams.setAndHAR(params, policy: policy)
        try stubs.record(set: set, har: path, log: log)
        return ["set": .string(set), "har": .string(path)]
    }
}
