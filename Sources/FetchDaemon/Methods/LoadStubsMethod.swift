import FoundationEssentials
import JSONRPC

/// `loadStubs {set, har}` -> `{loaded}`: a HAR file's entries as stubs of the set (see
/// `HARStubs`); a file that is not HAR is refused whole (-32602 naming `har`, -32003 when it
/// cannot be read), nothing half-loaded. Runs in a task: the file is read now.
struct LoadStubsMethod: RPCMethod {
    static let name = "loadStubs"

    let stubs: StubStore
    let policy: FilePolicy

    func call(_ params: JSONValue?, context: RPCContext) async throws -> JSONValue {
        let (set, path) = try StubParams.setAndHAR(params, policy: policy)
        let loaded = try stubs.load(harFile: path, set: set)
        return ["loaded": JSONValue(loaded)]
    }
}
