import JSONRPC

/// `getLogging`: the HTTP log settings in force.
struct GetLoggingMethod: InlineRPCMethod {
    static let name = "getLogging"

    let httpLog: HTTPLog

    func callInline(_ params: JSONValue?, context: RPCContext) throws -> JSONValue {
        let reader = try ParamReader(params)
        try reader.finish()
        return SettingsFields.logging(httpLog.current)
    }
}
