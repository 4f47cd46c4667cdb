import FetchEngine
import JSONRPC

/// `setRateLimit {host, maxConcurrent, requestsPerSecond, burst, followServer, ...}`: changes a host's limits
/// for every client at once. A field left out keeps its value (a new host starts from `*`);
/// null clears it.
struct SetRateLimitMethod: InlineRPCMethod {
    static let name = "setRateLimit"

    let admission: HostAdmission
    /// nil without `--redis`: `shared: true` is refused then.
    let shared: SharedAdmission?

    func callInline(_ params: JSONValue?, context: RPCContext) throws -> JSONValue {
        let (host, limit) = try Self.limit(params, current: admission.snapshot().scheduler, redis: shared != nil)
        admission.setLimit(limit, for: host)
        return SettingsFields.rateLimit(host: host, limit: limit, redis: shared != nil)
    }

    /// The host pattern and the limit the params give it (the fields left out keep
    /// `current`'s); `path` prefixes the fields of errors (a --config file's `rateLimits[2]`).
    /// `redis`: the daemon runs with `--redis`, so `shared: true` is accepted.
    static func limit(_ params: JSONValue?, current: HostScheduler, path: String = "", redis: Bool = false) throws -> (String, HostScheduler.Limit) {
        var reader = try ParamReader(params, path: path)
        let host = try reader.requiredString("host").lowercased()
        guard host == "*" || HostPattern.isValid(host) else {
            throw RPCError.invalidParams(field: reader.field("host"), "expected a host name, name:port, or *")
        }
        var limit = current.limits[host] ?? current.limits["*"]?.asNewEntry ?? HostScheduler.Limit()
        if reader.value("maxConcurrent") == .null {
            limit.maxConcurrent = nil
        } else if let cap = try reader.integer("maxConcurrent", in: 0...1_000_000) {
            // 0 means no cap, as with --max-per-host 0 (and GTMSessionFetcher's per-host limit).
            limit.maxConcurrent = cap == 0 ? nil : cap
        }
        if reader.value("requestsPerSecond") == .null {
            limit.requestsPerSecond = nil
        } else if let rps = try reader.number("requestsPerSecond", in: 0.000001...1_000_000) {
            limit.requestsPerSecond = rps
        }
        if reader.value("burst") == .null {
            limit.burst = 1
        } else if let burst = try reader.integer("burst", in: 1...1_000_000) {
            limit.burst = burst
        }
        if let isShared = try reader.bool("shared") {
            guard !isShared || redis else {
                throw RPCError.invalidParams(field: reader.field("shared"), "a shared limit needs fetchd --redis URL")
            }
            limit.shared = isShared
        }
        if let mode = try reader.string("onRedisDown") {
            guard let parsed = HostScheduler.Limit.RedisDownMode(rawValue: mode) else {
                throw RPCError.invalidParams(field: reader.field("onRedisDown"), "expected \"local\" or \"wait\"")
            }
            limit.onRedisDown = parsed
        }
        if let share = try reader.number("localShare", in: 0.000001...1) {
            limit.localShare = share
        }
        if let follow = try reader.bool("followServer") { limit.followServer = follow }
        if reader.value("maxRecvBytesPerSecond") == .null {
            limit.maxRecvBytesPerSecond = nil
        } else if let budget = try reader.integer("maxRecvBytesPerSecond", in: 1...(1 << 40)) {
            limit.maxRecvBytesPerSecond = budget
        }
        if let adaptive = try reader.bool("adaptive") { limit.adaptive = adaptive }
        if limit.adaptive {
            // Named after the field this call gave, so the caller sees what to change.
            let field = reader.isPresent("adaptive") ? "adaptive" : reader.isPresent("maxConcurrent") ? "maxConcurrent" : "shared"
            guard limit.maxConcurrent != nil else {
                throw RPCError.invalidParams(field: reader.field(field), "adaptive needs maxConcurrent: the most it grows to")
            }
            guard !limit.shared else {
                throw RPCError.invalidParams(field: reader.field(field), "adaptive is not for a shared limit: each daemon adapts to its own answers")
            }
        }
        try reader.finish()
        return (host, limit)
    }
}
