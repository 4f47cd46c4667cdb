import JSONRPC

/// `ping` -> "pong": is the daemon there?
struct PingMethod: InlineRPCMethod {
    static let name = "ping"

    func callInline(_ params: JSONValue?, context: RPCContext) throws -> JSONValue {
        let reader = try ParamReader(params)
        try reader.finish()
        return "pong"
    }
}
