import JSONRPC

/// `getLogging`: the HTTP log settings in force.
struct GetLoggingMethod: InlineRPCMethod {
    static let name = "getLogging"

    let httpLog: HTTPLog

    func callInline(_ params: JSONValue?, context: RPCContext) throws -> JSONValue {
        let reader = try ParamReader(params)
        try reader.finish()
        return Self.describe(httpLog.current)
    }

    static func describe(_ settings: HTTPLog.Settings) -> JSONValue {
        [
            "enabled": .bool(settings.enabled), "directory": .string(settings.directory),
            "bodies": .bool(settings.bodies), "maxBodyBytes": JSONValue(settings.maxBodyBytes),
            "redact": .bool(settings.redact),
        ]
    }
}
