import JSONRPC

/// `setLogging {enabled, directory?, bodies?, maxBodyBytes?, redact?}`: HTTP logs (one HAR
/// file per finished job) on or off for every client, while running.
struct SetLoggingMethod: RPCMethod {
    static let name = "setLogging"

    let httpLog: HTTPLog

    func call(_ params: JSONValue?, context: RPCContext) async throws -> JSONValue {
        var reader = try ParamReader(params)
        var settings = httpLog.current
        guard let enabled = try reader.bool("enabled") else {
            throw RPCError.invalidParams(field: "enabled", "required")
        }
        settings.enabled = enabled
        if let directory = try reader.string("directory") {
            try FilePolicy.checkPath(directory, field: reader.field("directory"))
            settings.directory = directory
        }
        if let bodies = try reader.bool("bodies") { settings.bodies = bodies }
        if let limit = try reader.integer("maxBodyBytes", in: 0...(1 << 30)) { settings.maxBodyBytes = limit }
        if let redact = try reader.bool("redact") { settings.redact = redact }
        try reader.finish()
        try httpLog.apply(settings)
        return SettingsFields.logging(settings)
    }
}
