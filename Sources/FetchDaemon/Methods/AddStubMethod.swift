import JSONRPC

/// `addStub {set, match, respond | respondSequence | fault, priority, times}` -> `{stubId}`:
/// a canned answer for requests that name the set (protocol.md, "Stubs"). Runs in a task: a
/// `bodyFile` is read now, once.
struct AddStubMethod: RPCMethod {
    static let name = "addStub"

    let stubs: StubStore
    let policy: FilePolicy

    func call(_ params: JSONValue?, context: RPCContext) async throws -> JSONValue {
        let stub = try StubParams(params, policy: policy)
        let id = try stubs.add(stub)
        return ["stubId": .string(id)]
    }
}
