import FetchEngine
import FoundationEssentials
import Glibc

/// The scheduler's starting limits: the `*` defaults, then `--config`, then `--rate` flags.
///
/// The file has one host per line: `HOST [maxConcurrent=N|none] [rps=X|none] [burst=N]`,
/// where HOST is `name`, `name:port` or `*`; `#` starts a comment.
enum RateLimitConfig {
    struct LineError: Error, CustomStringConvertible {
        let line: Int
        let detail: String
        var description: String { "line \(line): \(detail)" }
    }

    /// `rates`: whether `--rate` flags are applied here (the config file's entries come between).
    static func scheduler(options: DaemonOptions, file: String?, rates: Bool = true) throws -> HostScheduler {
        var defaults = HostScheduler.Limit()
        if let cap = options.maxPerHost { defaults.maxConcurrent = cap == 0 ? nil : cap }
        var scheduler = HostScheduler(defaultLimit: defaults, maxQueued: options.maxQueued)
        if let file {
            for (pattern, limit) in try parse(file, defaults: defaults) { scheduler.setLimit(limit, for: pattern) }
        }
        return rates ? applyRates(options.rates, to: scheduler) : scheduler
    }

    /// `--rate HOST=RPS[:BURST]`: the host's limit (or the `*` default's) with that rate.
    static func applyRates(_ rates: [DaemonOptions.RateFlag], to scheduler: HostScheduler) -> HostScheduler {
        var scheduler = scheduler
        for rate in rates {
            var limit = scheduler.limits[rate.host.lowercased()] ?? scheduler.limit(for: HostKey(scheme: "http", name: "", port: 0)).asNewEntry
            limit.requestsPerSecond = rate.requestsPerSecond
            if let burst = rate.burst { limit.burst = burst }
            scheduler.setLimit(limit, for: rate.host)
        }
        return scheduler
    }

    static func parse(_ text: String, defaults: HostScheduler.Limit) throws -> [(String, HostScheduler.Limit)] {
        var entries: [(String, HostScheduler.Limit)] = []
        for (index, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = rawLine.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
            let words = line.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\r" })
            guard let host = words.first else { continue }
            guard HostPattern.isValid(String(host).lowercased()) else {
                throw LineError(line: index + 1, detail: "\(host) is not a host: expected name, name:port or *")
            }
            var limit = host == "*" ? defaults : (entries.first { $0.0 == "*" }?.1 ?? defaults)
            for word in words.dropFirst() {
                let pair = word.split(separator: "=", maxSplits: 1)
                guard pair.count == 2 else { throw LineError(line: index + 1, detail: "expected key=value, got \(word)") }
                let value = String(pair[1])
                switch pair[0] {
                case "maxConcurrent":
                    if value == "none" { limit.maxConcurrent = nil; continue }
                    guard let n = Int(value), n >= 0 else { throw LineError(line: index + 1, detail: "maxConcurrent must be a whole number or none") }
                    limit.maxConcurrent = n == 0 ? nil : n  // 0 = no cap, as everywhere
                case "rps", "requestsPerSecond":
                    if value == "none" { limit.requestsPerSecond = nil; continue }
                    guard let r = Double(value), r > 0, r.isFinite else { throw LineError(line: index + 1, detail: "rps must be a number > 0 or none") }
                    limit.requestsPerSecond = r
                case "burst":
                    guard let b = Int(value), b >= 1 else { throw LineError(line: index + 1, detail: "burst must be a whole number >= 1") }
                    limit.burst = b
                default:
                    throw LineError(line: index + 1, detail: "unknown setting \(pair[0])")
                }
            }
            entries.append((String(host), limit))
        }
        return entries
    }
}
