import FoundationEssentials
import Glibc

/// The daemon's command line, parsed from one declarative table of options.
public struct DaemonOptions: Sendable, Equatable {
    public var socketPath: String?
    public var caFile: String?
    public var cookieFile: String?
    public var maxMessageBytes = 16 << 20
    public var allowedDirectories: [String] = []
    public var shutdownGraceSeconds = 5.0
    public var verbose = false
    /// `--max-per-host`: the `*` default's maxConcurrent.
    public var maxPerHost: Int?
    /// `--rate HOST=RPS[:BURST]`, in order given.
    public var rates: [RateFlag] = []
    public var configPath: String?
    /// `--auth-file`: setAuth rules loaded at start.
    public var authFile: String?
    public var maxQueued = 10_000
    /// `--log-dir`: where HTTP logs go when enabled without a directory.
    public var logDirectory: String?
    /// `--spin-us`: how long the engine polls before it sleeps.
    public var spinMicroseconds = 40
    /// `--stubs`: stubs every request that names no set is matched against (set "default").
    public var stubsFile: String?
    /// `--offline`: a request no stub matches fails with stubMiss; nothing uses the network.
    public var offline = false
    /// `--state-dir`: where durable jobs are kept.
    public var stateDirectory: String?
    /// `--redis URL`: where shared limits are counted.
    var redis: RedisURL?

    public struct RateFlag: Sendable, Equatable {
        public var host: String
        public var requestsPerSecond: Double
        public var burst: Int?
    }

    public init() {}

    public enum Command: Equatable, Sendable {
        case run(DaemonOptions)
        case help
        case version
    }

    public struct UsageError: Error, CustomStringConvertible, Equatable {
        public let description: String
    }

    private struct Option: Sendable {
        let name: String
        let argument: String?
        let help: String
        let apply: @Sendable (inout DaemonOptions, String) throws(UsageError) -> Void
    }

    private static let table: [Option] = [
        Option(name: "--socket", argument: "PATH", help: "Unix socket to listen on (default: $FETCHD_SOCKET, $XDG_RUNTIME_DIR/fetchd.sock, /tmp/fetchd-<uid>/fetchd.sock)") { o, v throws(UsageError) in
            o.socketPath = try absolutePath(v, option: "--socket")
        },
        Option(name: "--ca-file", argument: "PATH", help: "CA bundle for TLS verification instead of the system store") { o, v throws(UsageError) in
            o.caFile = v
        },
        Option(name: "--cookie-file", argument: "PATH", help: "keep the default cookie jar in this Netscape cookies.txt (loaded at start, written after changes and at exit)") { o, v throws(UsageError) in
            o.cookieFile = try absolutePath(v, option: "--cookie-file")
        },
        Option(name: "--max-message-bytes", argument: "N", help: "longest JSON-RPC line accepted (default 16777216)") { o, v throws(UsageError) in
            guard let n = Int(v), n >= 64 else { throw UsageError(description: "--max-message-bytes takes a number of at least 64") }
            o.maxMessageBytes = n
        },
        Option(name: "--allow-dir", argument: "DIR", help: "only files under these directories may be read or written (repeatable; default: any)") { o, v throws(UsageError) in
            o.allowedDirectories.append(try absolutePath(v, option: "--allow-dir"))
        },
        Option(name: "--shutdown-grace", argument: "SECONDS", help: "on SIGTERM, how long running jobs may finish before they are cancelled (default 5)") { o, v throws(UsageError) in
            guard let s = Double(v), s >= 0, s <= 3600 else { throw UsageError(description: "--shutdown-grace takes seconds from 0 to 3600") }
            o.shutdownGraceSeconds = s
        },
        Option(name: "--max-per-host", argument: "N", help: "requests running at once per host, for hosts without their own limit (default 10; 0 = no cap)") { o, v throws(UsageError) in
            guard let n = Int(v), n >= 0 else { throw UsageError(description: "--max-per-host takes a whole number >= 0") }
            o.maxPerHost = n
        },
        Option(name: "--rate", argument: "HOST=RPS[:BURST]", help: "requests per second (and burst) for a host, name or name:port or * (repeatable)") { o, v throws(UsageError) in
            o.rates.append(try parseRate(v))
        },
        Option(name: "--config", argument: "PATH", help: "rate limit file: lines of `HOST [maxConcurrent=N] [rps=X] [burst=N]` (see docs/rate-limits.md)") { o, v throws(UsageError) in
            o.configPath = try absolutePath(v, option: "--config")
        },
        Option(name: "--auth-file", argument: "PATH", help: "auth rules loaded at start: a JSON array of setAuth params, in a file only you can read (see docs/auth.md)") { o, v throws(UsageError) in
            o.authFile = try absolutePath(v, option: "--auth-file")
        },
        Option(name: "--max-queued", argument: "N", help: "requests that may wait for their host before new ones get -32005 (default 10000)") { o, v throws(UsageError) in
            guard let n = Int(v), n >= 1 else { throw UsageError(description: "--max-queued takes a whole number >= 1") }
            o.maxQueued = n
        },
        Option(name: "--log-dir", argument: "DIR", help: "directory for HTTP logs (HAR files) when setLogging names none (default $XDG_STATE_HOME/fetchd/http-logs)") { o, v throws(UsageError) in
            o.logDirectory = try absolutePath(v, option: "--log-dir")
        },
        Option(name: "--spin-us", argument: "N", help: "microseconds the engine keeps polling after work before it sleeps: lower latency for a little CPU (default 40; 0 = sleep at once)") { o, v throws(UsageError) in
            guard let n = Int(v), (0...10_000).contains(n) else { throw UsageError(description: "--spin-us takes microseconds from 0 to 10000") }
            o.spinMicroseconds = n
        },
        Option(name: "--stubs", argument: "FILE", help: "answer requests from these stubs (a HAR file, or a JSON array of addStub params): set \"default\", used by every request that names no other") { o, v throws(UsageError) in
            o.stubsFile = try absolutePath(v, option: "--stubs")
        },
        Option(name: "--offline", argument: nil, help: "never use the network: a request no stub answers fails with stubMiss") { o, _ throws(UsageError) in
            o.offline = true
        },
        Option(name: "--state-dir", argument: "DIR", help: "where durable jobs are kept, made 0700 (default $XDG_STATE_HOME/fetchd, else ~/.local/state/fetchd)") { o, v throws(UsageError) in
            o.stateDirectory = try absolutePath(v, option: "--state-dir")
        },
        Option(name: "--redis", argument: "URL", help: "count `shared` rate limits in this Redis, with every daemon that uses it: redis://[:password@]host:port/db or unix:///path (see docs/rate-limits.md)") { o, v throws(UsageError) in
            do throws(RedisURL.Invalid) {
                o.redis = try RedisURL(v)
            } catch {
                throw UsageError(description: error.description)
            }
        },
        Option(name: "--verbose", argument: nil, help: "log connections and requests to stderr") { o, _ throws(UsageError) in
            o.verbose = true
        },
    ]

    public static func parse(_ arguments: [String]) throws(UsageError) -> Command {
        var options = DaemonOptions()
        var index = 0
        while index < arguments.count {
            let word = arguments[index]
            if word == "--help" || word == "-h" { return .help }
            if word == "--version" { return .version }
            var name = word
            var inlineValue: String? = nil
            if let equals = word.firstIndex(of: "="), word.hasPrefix("--") {
                name = String(word[..<equals])
                inlineValue = String(word[word.index(after: equals)...])
            }
            guard let option = table.first(where: { $0.name == name }) else {
                throw UsageError(description: "unknown option \(word) (see fetchd --help)")
            }
            var value = ""
            if option.argument != nil {
                if let inlineValue {
                    value = inlineValue
                } else {
                    index += 1
                    guard index < arguments.count else { throw UsageError(description: "\(name) needs a value") }
                    value = arguments[index]
                }
            }
            try option.apply(&options, value)
            index += 1
        }
        return .run(options)
    }

    public static var helpText: String {
        var lines = [
            "usage: fetchd [OPTIONS]",
            "",
            "fetchd does HTTP for other programs: they speak JSON-RPC 2.0 to it on a Unix socket.",
            "",
            "options:",
        ]
        for option in table {
            let left = option.argument.map { "\(option.name) \($0)" } ?? option.name
            lines.append("  " + Self.padded(left) + option.help)
        }
        lines.append("  " + Self.padded("--help") + "show this help")
        lines.append("  " + Self.padded("--version") + "show the version")
        lines.append("")
        lines.append("SIGTERM or SIGINT: stop accepting, answer what is pending, remove the socket, exit 0.")
        return lines.joined(separator: "\n")
    }

    /// Where HTTP logs go by default: `--log-dir`, else the XDG state directory.
    public func httpLogDirectory(environment: [String: String]) -> String {
        if let logDirectory { return logDirectory }
        if let state = environment["XDG_STATE_HOME"], state.hasPrefix("/") { return state + "/fetchd/http-logs" }
        let home = environment["HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil } ?? "/tmp"
        return home + "/.local/state/fetchd/http-logs"
    }

    /// Where durable jobs are kept: `--state-dir`, else the XDG state directory.
    public func stateDirectory(environment: [String: String]) -> String {
        if let stateDirectory { return stateDirectory }
        if let state = environment["XDG_STATE_HOME"], state.hasPrefix("/") { return state + "/fetchd" }
        let home = environment["HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil } ?? "/tmp"
        return home + "/.local/state/fetchd"
    }

    /// `HOST=RPS[:BURST]`
    static func parseRate(_ text: String) throws(UsageError) -> RateFlag {
        guard let equals = text.lastIndex(of: "=") else { throw UsageError(description: "--rate takes HOST=RPS[:BURST], got \(text)") }
        let host = String(text[..<equals])
        let numbers = text[text.index(after: equals)...].split(separator: ":", omittingEmptySubsequences: false)
        guard HostPattern.isValid(host.lowercased()) else {
            throw UsageError(description: "--rate: \(host) is not a host: expected name, name:port or *")
        }
        guard numbers.count <= 2, let rps = Double(numbers[0]), rps > 0, rps.isFinite else {
            throw UsageError(description: "--rate takes HOST=RPS[:BURST] with RPS > 0, got \(text)")
        }
        var burst: Int? = nil
        if numbers.count == 2 {
            guard let b = Int(numbers[1]), b >= 1 else { throw UsageError(description: "--rate burst must be a whole number >= 1, got \(text)") }
            burst = b
        }
        return RateFlag(host: host, requestsPerSecond: rps, burst: burst)
    }

    private static func absolutePath(_ path: String, option: String) throws(UsageError) -> String {
        guard !path.isEmpty else { throw UsageError(description: "\(option) needs a path") }
        if path.hasPrefix("/") { return path }
        return FileManager.default.currentDirectoryPath + "/" + path
    }
}

public enum FetchdVersion {
    public static let text = "0.1.0"
}

extension DaemonOptions {
    /// The option column of --help, 26 wide.
    static func padded(_ text: String) -> String {
        text.count >= 26 ? text : text + String(repeating: " ", count: 26 - text.count)
    }
}
