import FoundationEssentials
import Glibc
import JSONRPC

/// `getStatus`: version, pid, uptime, connections and job counts.
struct GetStatusMethod: InlineRPCMethod {
    static let name = "getStatus"

    let jobs: JobRegistry
    let httpLog: HTTPLog
    let startedAt: ContinuousClock.Instant
    /// nil without `--redis`.
    let shared: SharedAdmission?
    let connectionCount: @Sendable () -> Int

    func callInline(_ params: JSONValue?, context: RPCContext) throws -> JSONValue {
        let reader = try ParamReader(params)
        try reader.finish()
        let counts = jobs.counts
        let uptime = ContinuousClock.now - startedAt
        let seconds = Double(uptime.components.seconds) + Double(uptime.components.attoseconds) / 1e18
        return [
            "version": .string(FetchdVersion.text),
            "pid": JSONValue(Int(getpid())),
            "uptimeSeconds": .double((seconds * 1000).rounded() / 1000),
            "connections": JSONValue(connectionCount()),
            "jobs": [
                "queued": JSONValue(counts.queued), "running": JSONValue(counts.running),
                "waiting": JSONValue(counts.waiting), "finished": JSONValue(counts.finished),
                "failed": JSONValue(counts.failed),
            ],
            "redis": shared.map { .string($0.redisUp ? "up" : "down") } ?? .null,
            "logging": {
                let settings = httpLog.current
                return ["enabled": .bool(settings.enabled), "directory": .string(settings.directory)]
            }(),
        ]
    }
}
