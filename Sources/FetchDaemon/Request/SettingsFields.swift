import FetchEngine
import JSONRPC

/// The daemon's settings as its methods answer them: a getter and its setter answer the same
/// shape, from here.
enum SettingsFields {
    static func logging(_ settings: HTTPLog.Settings) -> JSONValue {
        [
            "enabled": .bool(settings.enabled), "directory": .string(settings.directory),
            "bodies": .bool(settings.bodies), "maxBodyBytes": JSONValue(settings.maxBodyBytes),
            "redact": .bool(settings.redact),
        ]
    }

    static func rateLimit(host: String, limit: HostScheduler.Limit) -> JSONValue {
        [
            "host": .string(host),
            "maxConcurrent": limit.maxConcurrent.map { JSONValue($0) } ?? .null,
            "requestsPerSecond": limit.requestsPerSecond.map(JSONValue.double) ?? .null,
            "burst": JSONValue(limit.burst),
            "shared": .bool(limit.shared), "onRedisDown": .string(limit.onRedisDown.rawValue),
            "localShare": .double(limit.localShare),
        ]
    }
}
