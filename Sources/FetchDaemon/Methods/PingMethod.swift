import JSONRPC

/// `ping` -> "pong": is the daemon there?
struct PingMethod: RPCMethod {
    static let name = "ping"

    func call(_ params: JSONValue?, context: RPCContext) async throws -> JSONValue {
        let reader = try ParamReader(params)
        try reader.finish()
        return "pong"
    }
}
