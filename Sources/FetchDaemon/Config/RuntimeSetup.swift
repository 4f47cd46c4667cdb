import FetchEngine
import FoundationEssentials
import JSONRPC
import Synchronization

/// The setup that comes from the options and can change while the daemon runs: host limits
/// (`--max-per-host`, `--rate`, the config file's `rateLimits` or the older rate-limit file),
/// auth rules (`--auth-file`, the config file's `auth`), HTTP logging (`logging`) and the log's
/// level (`verbose`). Applied at start; a SIGHUP reload applies what changed, without
/// stopping a job: only the limits and rules that the options set are touched, not those a
/// client set with setRateLimit or setAuth for other hosts.
final class RuntimeSetup: Sendable {
    private let admission: HostAdmission
    private let credentials: CredentialStore
    private let httpLog: HTTPLog
    private let policy: FilePolicy
    private let log: Logger

    private struct Applied {
        var limits: [String: HostScheduler.Limit] = [:]
        var authHosts: [AuthHostPattern] = []
        var logging: JSONValue?
    }

    private let applied = Locked(Applied())

    init(admission: HostAdmission, credentials: CredentialStore, httpLog: HTTPLog, policy: FilePolicy, log: Logger,
         limits: [String: HostScheduler.Limit]) {
        self.admission = admission
        self.credentials = credentials
        self.httpLog = httpLog
        self.policy = policy
        self.log = log
        applied.withLock { $0.limits = limits }
    }

    /// The host limits the options give: the `*` defaults, the older rate-limit file or the
    /// config's `rateLimits`, then `--rate`.
    static func scheduler(_ options: DaemonOptions) throws(StartupError) -> HostScheduler {
        let source = "--config \(options.configPath ?? "")"
        var legacyFile: String? = nil
        if let path = options.configPath {
            do {
                let text = try ConfigFile.read(path)
                if !ConfigFile.isJSON(text) { legacyFile = text }
            } catch {
                throw StartupError(error.description)
            }
        }
        var scheduler: HostScheduler
        do {
            scheduler = try RateLimitConfig.scheduler(options: options, file: legacyFile, rates: false)
        } catch {
            throw StartupError("\(source): \(error)")
        }
        for (index, entry) in (options.configSections?.rateLimits ?? []).enumerated() {
            do {
                let (host, limit) = try SetRateLimitMethod.limit(entry, current: scheduler, path: "rateLimits[\(index)]",
                                                             redis: options.redis != nil)
                scheduler.setLimit(limit, for: host)
            } catch {
                throw StartupError("\(source): \(Self.describe(error))")
            }
        }
        // --rate last: a flag (or the config's `rate`) wins over a file's entry for its host.
        return RateLimitConfig.applyRates(options.rates, to: scheduler)
    }

    /// Every rule of `--auth-file` and of the config's `auth` (a config file with rules must be private).
    func authRules(_ options: DaemonOptions) throws(StartupError) -> [AuthRule] {
        var rules: [AuthRule] = []
        if let path = options.authFile { rules += try AuthFile.rules(path: path, policy: policy) }
        if let entries = options.configSections?.auth, !entries.isEmpty, let path = options.configPath {
            try AuthFile.checkPrivate(path, flag: "--config")
            rules += try AuthFile.rules(entries, source: "--config \(path)", prefix: "auth", policy: policy)
        }
        return rules
    }

    private func loggingSettings(_ options: DaemonOptions) throws(StartupError) -> HTTPLog.Settings? {
        guard let params = options.configSections?.logging else { return nil }
        do {
            return try SetLoggingMethod.settings(params, current: httpLog.current, path: "logging")
        } catch {
            throw StartupError("--config \(options.configPath ?? ""): \(Self.describe(error))")
        }
    }

    /// At start, after the admission was made with `scheduler(options)`.
    func start(_ options: DaemonOptions) throws(StartupError) {
        let rules = try authRules(options)
        rules.forEach(credentials.set)
        if !rules.isEmpty { log.info("loaded \(rules.count) auth rule(s)") }
        if let settings = try loggingSettings(options) {
            do { try httpLog.apply(settings) } catch { throw StartupError("--config: logging: \(Self.describe(error))") }
        }
        applied.withLock {
            $0.authHosts = rules.map(\.host)
            $0.logging = options.configSections?.logging
        }
        let sections = options.configSections
        if sections?.cache != nil || sections?.redis != nil {
            log.notice("--config: the cache and redis keys are checked and kept; this build has neither the HTTP cache nor shared limits yet")
        }
    }

    /// SIGHUP: everything is checked before anything changes; then limits, rules, logging
    /// and the log level move to the new options. Throws (and changes nothing) when the new
    /// options are not valid.
    func reload(to new: DaemonOptions) throws(StartupError) {
        let limits = try Self.scheduler(new).limits
        let rules = try authRules(new)
        let logging = try loggingSettings(new)
        let (oldLimits, oldHosts, oldLogging) = applied.withLock { ($0.limits, $0.authHosts, $0.logging) }
        for (pattern, _) in oldLimits where limits[pattern] == nil { admission.removeLimit(for: pattern) }
        for (pattern, limit) in limits where oldLimits[pattern] != limit { admission.setLimit(limit, for: pattern) }
        let newHosts = rules.map(\.host)
        for host in oldHosts where !newHosts.contains(host) { _ = credentials.remove(host) }
        rules.forEach(credentials.set)
        if let logging, new.configSections?.logging != oldLogging {
            do { try httpLog.apply(logging) } catch { log.error("SIGHUP: logging: \(Self.describe(error))") }
        }
        log.setMinimum(new.verbose ? .debug : .notice)
        applied.withLock {
            $0.limits = limits
            $0.authHosts = newHosts
            $0.logging = new.configSections?.logging
        }
    }

    /// A params error as `field: detail`.
    static func describe(_ error: any Error) -> String {
        let refused = ErrorMapping.rpcError(for: error)
        let field = refused.data?["field"]?.stringValue.map { "\($0): " } ?? ""
        return field + (refused.data?["detail"]?.stringValue ?? refused.message)
    }
}
