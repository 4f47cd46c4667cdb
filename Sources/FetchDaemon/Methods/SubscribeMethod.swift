import JSONRPC

/// `subscribe {"jobs": true}`: this connection hears a `jobEvent` for every job of every
/// client from now on (JobEvents).
struct SubscribeMethod: InlineRPCMethod {
    static let name = "subscribe"

    let events: JobEvents
    let jobs: JobRegistry

    func callInline(_ params: JSONValue?, context: RPCContext) throws -> JSONValue {
        var reader = try ParamReader(params)
        let wanted = try reader.bool("jobs") ?? true
        try reader.finish()
        if wanted {
            events.subscribe(context, budget: jobs.budget(of: context.connectionID))
        } else {
            events.unsubscribe(context.connectionID)
        }
        return ["subscribed": .bool(wanted)]
    }
}

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
