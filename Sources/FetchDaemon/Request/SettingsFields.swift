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

    /// `redis`: the daemon runs with `--redis`, and the entry says how it is shared (without
    /// it the version 1 shape is kept: nothing can be shared).
    static func rateLimit(host: String, limit: HostScheduler.Limit, redis: Bool) -> JSONValue {
        var entry: JSONObject = [
            "host": .string(host),
            "maxConcurrent": limit.maxConcurrent.map { JSONValue($0) } ?? .null,
            "requestsPerSecond": limit.requestsPerSecond.map(JSONValue.double) ?? .null,
            "burst": JSONValue(limit.burst),
            "followServer": .bool(limit.followServer),
            "adaptive": .bool(limit.adaptive),
            "maxRecvBytesPerSecond": limit.maxRecvBytesPerSecond.map { JSONValue($0) } ?? .null,
        ]
        if redis {
            entry["shared"] = .bool(limit.shared)
            entry["onRedisDown"] = .string(limit.onRedisDown.rawValue)
            entry["localShare"] = .double(limit.localShare)
        }
        return .object(entry)
    }
}
