import JSONRPC

/// `unsubscribe`: no more jobEvent notifications on this connection.
struct UnsubscribeMethod: InlineRPCMethod {
    static let name = "unsubscribe"

    let events: JobEvents

    func callInline(_ params: JSONValue?, context: RPCContext) throws -> JSONValue {
        let reader = try ParamReader(params)
        try reader.finish()
        events.unsubscribe(context.connectionID)
        return ["subscribed": false]
    }
}
