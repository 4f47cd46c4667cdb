import FetchEngine
import FoundationEssentials
import Glibc
import JSONRPC

/// `getRateLimits`: every configured limit with the running and queued requests of the
/// hosts it governs and when a Retry-After pause ends; `hosts` details each active host.
struct GetRateLimitsMethod: InlineRPCMethod {
    static let name = "getRateLimits"

    let admission: HostAdmission
    /// nil without `--redis`.
    let shared: SharedAdmission?

    func callInline(_ params: JSONValue?, context: RPCContext) throws -> JSONValue {
        let reader = try ParamReader(params)
        try reader.finish()
        let (scheduler, now) = admission.snapshot()
        let wallNow = Date()
        func iso(_ monotonic: Double?) -> JSONValue {
            guard let monotonic, monotonic > now else { return .null }
            return .string(ISO8601Format.string(wallNow.addingTimeInterval(monotonic - now)))
        }
        // Every active host: the local scheduler's, and this daemon's part of shared ones.
        var active: [HostKey: (running: Int, queued: Int, pausedUntil: Double?)] = [:]
        for (key, state) in scheduler.hosts { active[key] = (state.running, state.waiting.count, state.pausedUntil) }
        if let shared {
            for (key, counts) in shared.counts().hosts {
                let old = active[key] ?? (0, 0, nil)
                let paused = [old.pausedUntil, counts.pausedUntil].compactMap { $0 }.max()
                active[key] = (old.running + counts.running, old.queued + counts.queued, paused)
            }
        }
        let redisUp = shared?.redisUp ?? false
        var limits: [JSONValue] = []
        for pattern in scheduler.limits.keys.sorted(by: { ($0 == "*" ? "" : $0) < ($1 == "*" ? "" : $1) }) {
            guard let limit = scheduler.limits[pattern] else { continue }
            let governed = active.filter { scheduler.limitEntry(for: $0.key) == pattern }
            var entry = SettingsFields.rateLimit(host: pattern, limit: limit, redis: shared != nil).objectValue ?? JSONObject()
            entry["running"] = JSONValue(governed.values.reduce(0) { $0 + $1.running })
            entry["queued"] = JSONValue(governed.values.reduce(0) { $0 + $1.queued })
            entry["pausedUntil"] = iso(governed.values.compactMap(\.pausedUntil).max())
            // Where the limit is counted now: a shared limit in Redis, unless Redis is down and
            // the limit falls back to its local share (with `wait`, requests wait for Redis).
            if shared != nil {
                let inRedis = limit.shared && (redisUp || limit.onRedisDown == .wait)
                entry["backend"] = .string(inRedis ? "redis" : "local")
            }
            limits.append(.object(entry))
        }
        let hosts: [JSONValue] = active.keys.sorted { $0.description < $1.description }.compactMap { key in
            guard let state = active[key] else { return nil }
            return [
                "host": .string(key.description), "limit": .string(scheduler.limitEntry(for: key)),
                "running": JSONValue(state.running), "queued": JSONValue(state.queued),
                "pausedUntil": iso(state.pausedUntil),
            ]
        }
        return ["limits": .array(limits), "hosts": .array(hosts), "queued": JSONValue(scheduler.queued),
                "maxQueued": JSONValue(scheduler.maxQueued)]
    }
}

enum ISO8601Format {
    static func string(_ date: Date) -> String {
        date.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
    }
}
