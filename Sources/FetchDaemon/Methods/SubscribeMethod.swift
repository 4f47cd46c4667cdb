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
