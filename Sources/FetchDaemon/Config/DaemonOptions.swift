import FetchEngine
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
    /// `--engine-threads`: threads that run small requests beside their connections.
    public var engineThreads = EngineSettings.defaultSmallRequestThreads
    /// `--stubs`: stubs every request that names no set is matched against (set "default").
    public var stubsFile: String?
    /// `--offline`: a request no stub matches fails with stubMiss; nothing uses the network.
    public var offline = false
    /// `--state-dir`: where durable jobs are kept.
    public var stateDirectory: String?
    /// `--metrics-listen`: where Prometheus' text is served over HTTP.
    public var metricsListen: ListenAddress?
    /// What a --config file holds besides flags (rateLimits, auth, logging, cache, redis).
    public var configSections: ConfigFile.Sections?
    /// The command line as given (a SIGHUP reload applies it over the file again).
    public var arguments: [String] = []

    /// A numeric address and a port (`127.0.0.1:9464`, `[::1]:9464`; `:9464` or `9464` for
    /// 127.0.0.1).
    public struct ListenAddress: Sendable, Equatable, CustomStringConvertible {
        public var host: String
        public var port: Int
        public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

        static func parse(_ text: String) -> ListenAddress? {
            var host = "127.0.0.1"
            var portText = Substring(text)
            if let colon = text.lastIndex(of: ":") {
                var name = text[..<colon]
                portText = text[text.index(after: colon)...]
                if name.hasPrefix("[") && name.hasSuffix("]") { name = name.dropFirst().dropLast() }
                if name == "localhost" { name = "127.0.0.1" }
                if !name.isEmpty { host = String(name) }
            }
            guard let port = Int(portText), (1...65535).contains(port), host.allSatisfy({ $0.isHexDigit || $0 == "." || $0 == ":" }) else {
                return nil
            }
            return ListenAddress(host: host, port: port)
        }
    }
    /// `--cache-dir`: the HTTP cache's directory (nil: no cache); `--cache-max-bytes` its bound.
    public var cacheDirectory: String?
    public var cacheMaxBytes: Int64 = 1 << 30
    public var cacheDisabled = false
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

    /// One setting: its flag, its key in a `--config` file, its default and bounds as --help
    /// and operations.md show them, and whether SIGHUP applies a changed value to the running
    /// daemon. The one table of settings: --help, the config file and the docs' list come
    /// from it (test_config checks the docs agree).
    struct Option: Sendable {
        let name: String
        let argument: String?
        /// The key in a --config file (camelCase); repeatable flags take an array.
        let key: String
        /// The setting it changes: a SIGHUP reload compares it to say what needs a restart.
        let field: any PartialKeyPath<DaemonOptions> & Sendable
        let defaultText: String
        let bounds: String
        /// SIGHUP applies a changed value without a restart.
        let runtime: Bool
        let repeatable: Bool
        let help: String
        let apply: @Sendable (inout DaemonOptions, String) throws(UsageError) -> Void

        init(_ name: String, _ argument: String?, key: String, field: any PartialKeyPath<DaemonOptions> & Sendable,
             default defaultText: String, bounds: String = "",
             runtime: Bool = false, repeatable: Bool = false, _ help: String,
             apply: @escaping @Sendable (inout DaemonOptions, String) throws(UsageError) -> Void) {
            self.name = name
            self.argument = argument
            self.key = key
            self.field = field
            self.defaultText = defaultText
            self.bounds = bounds
            self.runtime = runtime
            self.repeatable = repeatable
            self.help = help
            self.apply = apply
        }
    }

    static let table: [Option] = [
        Option("--socket", "PATH", key: "socket", field: \.socketPath, default: "$FETCHD_SOCKET, else $XDG_RUNTIME_DIR/fetchd.sock, else /tmp/fetchd-<uid>/fetchd.sock",
               "Unix socket to listen on") { o, v throws(UsageError) in
            o.socketPath = try absolutePath(v, option: "--socket")
        },
        Option("--ca-file", "PATH", key: "caFile", field: \.caFile, default: "the system store", "CA bundle for TLS verification") { o, v throws(UsageError) in
            o.caFile = v
        },
        Option("--cookie-file", "PATH", key: "cookieFile", field: \.cookieFile, default: "none",
               "keep the default cookie jar in this Netscape cookies.txt (loaded at start, written after changes and at exit)") { o, v throws(UsageError) in
            o.cookieFile = try absolutePath(v, option: "--cookie-file")
        },
        Option("--max-message-bytes", "N", key: "maxMessageBytes", field: \.maxMessageBytes, default: "16777216", bounds: ">= 64",
               "longest JSON-RPC line accepted") { o, v throws(UsageError) in
            guard let n = Int(v), n >= 64 else { throw UsageError(description: "--max-message-bytes takes a number of at least 64") }
            o.maxMessageBytes = n
        },
        Option("--allow-dir", "DIR", key: "allowDir", field: \.allowedDirectories, default: "any directory", repeatable: true,
               "only files under these directories may be read or written (repeatable)") { o, v throws(UsageError) in
            o.allowedDirectories.append(try absolutePath(v, option: "--allow-dir"))
        },
        Option("--shutdown-grace", "SECONDS", key: "shutdownGrace", field: \.shutdownGraceSeconds, default: "5", bounds: "0-3600", runtime: true,
               "on SIGTERM, how long running jobs may finish before they are cancelled") { o, v throws(UsageError) in
            guard let s = Double(v), s >= 0, s <= 3600 else { throw UsageError(description: "--shutdown-grace takes seconds from 0 to 3600") }
            o.shutdownGraceSeconds = s
        },
        Option("--max-per-host", "N", key: "maxPerHost", field: \.maxPerHost, default: "10", bounds: ">= 0", runtime: true,
               "requests running at once per host, for hosts without their own limit (0 = no cap)") { o, v throws(UsageError) in
            guard let n = Int(v), n >= 0 else { throw UsageError(description: "--max-per-host takes a whole number >= 0") }
            o.maxPerHost = n
        },
        Option("--rate", "HOST=RPS[:BURST]", key: "rate", field: \.rates, default: "none", bounds: "RPS > 0, BURST >= 1", runtime: true, repeatable: true,
               "requests per second (and burst) for a host, name or name:port or * (repeatable)") { o, v throws(UsageError) in
            o.rates.append(try parseRate(v))
        },
        Option("--config", "FILE", key: "", field: \.configPath, default: "none",
               "settings from a JSON file: these keys plus rateLimits, auth, cookieJars, logging, cache, redis (docs/operations.md); SIGHUP reloads it") { o, v throws(UsageError) in
            o.configPath = try absolutePath(v, option: "--config")
        },
        Option("--auth-file", "PATH", key: "authFile", field: \.authFile, default: "none", runtime: true,
               "auth rules loaded at start: a JSON array of setAuth params, in a file only you can read (see docs/auth.md)") { o, v throws(UsageError) in
            o.authFile = try absolutePath(v, option: "--auth-file")
        },
        Option("--max-queued", "N", key: "maxQueued", field: \.maxQueued, default: "10000", bounds: ">= 1",
               "requests that may wait for their host before new ones get -32005") { o, v throws(UsageError) in
            guard let n = Int(v), n >= 1 else { throw UsageError(description: "--max-queued takes a whole number >= 1") }
            o.maxQueued = n
        },
        Option("--log-dir", "DIR", key: "logDir", field: \.logDirectory, default: "$XDG_STATE_HOME/fetchd/http-logs, else ~/.local/state/fetchd/http-logs",
               "directory for HTTP logs (HAR files) when setLogging names none") { o, v throws(UsageError) in
            o.logDirectory = try absolutePath(v, option: "--log-dir")
        },
        Option("--spin-us", "N", key: "spinUs", field: \.spinMicroseconds, default: "40", bounds: "0-10000",
               "microseconds the engine keeps polling after work before it sleeps: lower latency for a little CPU (0 = sleep at once)") { o, v throws(UsageError) in
            guard let n = Int(v), (0...10_000).contains(n) else { throw UsageError(description: "--spin-us takes microseconds from 0 to 10000") }
            o.spinMicroseconds = n
        },
        Option("--engine-threads", "N", key: "engineThreads", field: \.engineThreads, default: "2 with 2 or more CPUs, else 1",
               bounds: "1-16",
               "engine threads for requests with bodies in memory, each serving its share of the socket's connections (downloads and file uploads have one more)") { o, v throws(UsageError) in
            guard let n = Int(v), (1...16).contains(n) else { throw UsageError(description: "--engine-threads takes a whole number from 1 to 16") }
            o.engineThreads = n
        },
        Option("--stubs", "FILE", key: "stubs", field: \.stubsFile, default: "none",
               "answer requests from these stubs (a HAR file, or a JSON array of addStub params): set \"default\", used by every request that names no other") { o, v throws(UsageError) in
            o.stubsFile = try absolutePath(v, option: "--stubs")
        },
        Option("--offline", nil, key: "offline", field: \.offline, default: "off", "never use the network: a request no stub answers fails with stubMiss") { o, _ throws(UsageError) in
            o.offline = true
        },
        Option("--state-dir", "DIR", key: "stateDir", field: \.stateDirectory, default: "$XDG_STATE_HOME/fetchd, else ~/.local/state/fetchd",
               "where durable jobs are kept, made 0700") { o, v throws(UsageError) in
            o.stateDirectory = try absolutePath(v, option: "--state-dir")
        },
        Option("--metrics-listen", "ADDR:PORT", key: "metricsListen", field: \.metricsListen, default: "none",
               "serve Prometheus metrics at http://ADDR:PORT/metrics (a numeric address; PORT alone: 127.0.0.1)") { o, v throws(UsageError) in
            guard let address = ListenAddress.parse(v) else {
                throw UsageError(description: "--metrics-listen takes ADDR:PORT with a numeric address (127.0.0.1:9464, [::1]:9464) or a port, got \(v)")
            }
            o.metricsListen = address
        },
        Option("--cache-dir", "DIR", key: "", field: \.cacheDirectory, default: "$XDG_CACHE_HOME/fetchd, else ~/.cache/fetchd",
               "the HTTP cache (RFC 9111, private) for every client, in DIR, made 0700 (--config: cache.dir)") { o, v throws(UsageError) in
            o.cacheDirectory = try absolutePath(v, option: "--cache-dir")
        },
        Option("--cache-max-bytes", "N", key: "", field: \.cacheMaxBytes, default: "1073741824", bounds: ">= 0; suffixes K, M, G",
               "the cache's bound, least recently used out first (--config: cache.maxBytes)") { o, v throws(UsageError) in
            o.cacheMaxBytes = try byteCount(v, option: "--cache-max-bytes")
        },
        Option("--no-cache", nil, key: "", field: \.cacheDisabled, default: "off", "no HTTP cache, whatever --cache-dir says") { o, _ throws(UsageError) in
            o.cacheDirectory = nil
            o.cacheDisabled = true
        },
        Option("--redis", "URL", key: "redis", field: \.redis, default: "none",
               "count `shared` rate limits in this Redis, with every daemon that uses it: redis://[:password@]host:port/db or unix:///path") { o, v throws(UsageError) in
            do throws(RedisURL.Invalid) {
                o.redis = try RedisURL(v)
            } catch {
                throw UsageError(description: error.description)
            }
        },
        Option("--verbose", nil, key: "verbose", field: \.verbose, default: "off", runtime: true, "log connections and requests to stderr") { o, _ throws(UsageError) in
            o.verbose = true
        },
    ]

    /// `base`: the settings of a --config file, which the flags override.
    /// The settings that differ between two option sets, by their table entry.
    static func changed(from old: DaemonOptions, to new: DaemonOptions) -> [Option] {
        table.filter { String(describing: old[keyPath: $0.field]) != String(describing: new[keyPath: $0.field]) }
    }

    public static func parse(_ arguments: [String], base: DaemonOptions = DaemonOptions()) throws(UsageError) -> Command {
        var options = base
        options.arguments = arguments
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
            // The same facts as operations.md's table of flags (test_config checks they agree).
            let key = option.key.isEmpty ? "-" : option.key + (option.repeatable ? " (array)" : "")
            lines.append("  " + Self.padded("") + "default: \(option.defaultText); bounds: \(option.bounds.isEmpty ? "-" : option.bounds); "
                         + "config: \(key); SIGHUP: \(option.runtime ? "applied" : "restart")")
        }
        lines.append("  " + Self.padded("--help") + "show this help")
        lines.append("  " + Self.padded("--version") + "show the version")
        lines.append("")
        lines.append("SIGTERM or SIGINT: stop accepting, answer what is pending, remove the socket, exit 0.")
        lines.append("SIGHUP: read --config FILE again; settings marked \"SIGHUP: applied\" change without a restart.")
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

    /// The cache's directory, or nil for none (`--no-cache` wins wherever it is): `--cache-dir`
    /// (or the config's cache.dir), else `$XDG_CACHE_HOME/fetchd`, else `~/.cache/fetchd`, as
    /// the contract has it. `isDefault`: no directory was given.
    public func cacheDirectory(environment: [String: String]) -> (path: String, isDefault: Bool)? {
        if cacheDisabled { return nil }
        if let cacheDirectory { return (cacheDirectory, false) }
        if let cache = environment["XDG_CACHE_HOME"], cache.hasPrefix("/") { return (cache + "/fetchd", true) }
        guard let home = environment["HOME"], home.hasPrefix("/") else { return nil }
        return (home + "/.cache/fetchd", true)
    }

    /// A byte count: digits with an optional K, M or G (powers of 1024).
    static func byteCount(_ text: String, option: String) throws(UsageError) -> Int64 {
        var digits = Substring(text)
        var unit: Int64 = 1
        if let last = digits.last?.uppercased(), let power = ["K": 10, "M": 20, "G": 30][last] {
            unit = 1 << power
            digits = digits.dropLast()
        }
        guard let n = Int64(digits), n > 0, n <= Int64.max / unit else {
            throw UsageError(description: "\(option) takes a byte count > 0 (K, M, G allowed), got \(text)")
        }
        return n * unit
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

extension DaemonOptions {
    /// With a --config FILE: the file's settings with these flags over them (exit 1 on error).
    public func loadingConfig() throws(ConfigFile.Invalid) -> DaemonOptions {
        guard let path = configPath else { return self }
        return try ConfigFile.load(path: path, arguments: arguments)
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
