import JSONRPC

/// `setLogging {enabled, directory?, bodies?, maxBodyBytes?, redact?}`: HTTP logs (one HAR
/// file per finished job) on or off for every client, while running.
struct SetLoggingMethod: RPCMethod {
    static let name = "setLogging"

    let httpLog: HTTPLog

    func call(_ params: JSONValue?, context: RPCContext) async throws -> JSONValue {
        let settings = try Self.settings(params, current: httpLog.current)
        try httpLog.apply(settings)
        return SettingsFields.logging(settings)
    }

    /// The settings the params ask for, from `current`; `path` prefixes error fields.
    static func settings(_ params: JSONValue?, current: HTTPLog.Settings, path: String = "") throws -> HTTPLog.Settings {
        var reader = try ParamReader(params, path: path)
        var settings = current
        guard let enabled = try reader.bool("enabled") else {
            throw RPCError.invalidParams(field: reader.field("enabled"), "required")
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
        return settings
    }
}
