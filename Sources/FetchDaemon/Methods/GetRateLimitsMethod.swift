import FetchEngine
import FoundationEssentials
import Glibc
import JSONRPC

/// `getRateLimits`: every configured limit with the running and queued requests of the
/// hosts it governs, when a pause ends and what the server last said of its budget; `hosts`
/// details each active host.
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
        // What the server last said of its budget, while its reset is ahead.
        func server(_ budget: ServerBudget?) -> JSONValue {
            guard let budget, budget.resetAt > now, budget.resetAt.isFinite else { return .null }
            return ["remaining": JSONValue(budget.remaining), "resetAt": iso(budget.resetAt)]
        }
        // Every active host: the local scheduler's, and this daemon's part of shared ones.
        var active: [HostKey: Active] = [:]
        for (key, state) in scheduler.hosts {
            active[key] = Active(running: state.running, queued: state.waiting.count, pausedUntil: state.pausedUntil,
                                 server: state.server, concurrencyNow: state.concurrencyNow(scheduler.limit(for: key)))
        }
        if let shared {
            for (key, counts) in shared.counts().hosts {
                var old = active[key] ?? Active(concurrencyNow: scheduler.limit(for: key).maxConcurrent)
                old.pausedUntil = [old.pausedUntil, counts.pausedUntil].compactMap { $0 }.max()
                old.running += counts.running
                old.queued += counts.queued
                active[key] = old
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
            // An adaptive entry: its lowest host's; else maxConcurrent.
            entry["concurrencyNow"] = (governed.values.compactMap(\.concurrencyNow).min() ?? limit.maxConcurrent)
                .map { JSONValue(min($0, limit.maxConcurrent ?? $0)) } ?? .null
            // The governed host with the least left (the latest reset among equals).
            entry["server"] = server(governed.values.compactMap(\.server).filter { $0.resetAt > now && $0.resetAt.isFinite }.min {
                $0.remaining != $1.remaining ? $0.remaining < $1.remaining : $0.resetAt > $1.resetAt
            })
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
                "pausedUntil": iso(state.pausedUntil), "server": server(state.server),
                "concurrencyNow": state.concurrencyNow.map { JSONValue($0) } ?? .null,
            ]
        }
        return ["limits": .array(limits), "hosts": .array(hosts), "queued": JSONValue(scheduler.queued),
                "maxQueued": JSONValue(scheduler.maxQueued)]
    }
}

/// One active host as getRateLimits counts it.
private struct Active {
    var running = 0
    var queued = 0
    var pausedUntil: Double?
    var server: ServerBudget?
    /// How many may run at once now (nil: no cap).
    var concurrencyNow: Int?
}
