import FetchEngine
import Dispatch
import FoundationEssentials
import Glibc
import JSONRPC
internal import CLinux

/// Joins the engine and the JSON-RPC layer: owns the engine, the jobs and the socket server
/// and passes them down to the methods. Nothing here is global.
public final class Daemon: Sendable {
    public let options: DaemonOptions
    public let socketPath: String
    private let log: Logger
    private let engine: HTTPEngine
    private let jobs: JobRegistry
    private let httpLog: HTTPLog
    private let server: SocketServer
    private let cookieFile: CookiePersister?
    private let credentials: CredentialStore
    private let durable: DurableStore
    private let metricsListener: MetricsListener?
    /// The HTTP cache, whose background revalidations stop with the daemon.
    private let cache: HTTPCache?
    private let systemd: Systemd
    /// Dispatch sources are thread-safe; resumed once in start, cancelled once in shutdown.
    private nonisolated(unsafe) let watchdogTimer: (any DispatchSourceTimer)?
    /// Starts the durable jobs a daemon before left unfinished (`start`).
    private let resumeDurable: @Sendable (DurableStore.Record) throws -> Void
    /// Limits, auth rules and logging from the options: applied again on SIGHUP.
    private let setup: RuntimeSetup
    /// The options in force (a SIGHUP reload replaces them).
    private let running: Locked<DaemonOptions>

    public init(options: DaemonOptions, environment: [String: String]) throws {
        self.options = options
        running = Locked(options)
        log = Logger(minimum: options.verbose ? .debug : .notice)
        if let limit = FileLimit.raiseSoftToHard() {
            log.info(limit.from == limit.to
                ? "open-file limit \(limit.to) (the hard limit)"
                : "open-file limit raised from \(limit.from) to \(limit.to) (the hard limit)")
        }
        let systemd = try Systemd.fromEnvironment(environment)
        self.systemd = systemd
        if let passed = systemd.listenFD {
            // systemd made the socket (its mode and directory are the unit's): serve it as it is.
            var name = [CChar](repeating: 0, count: 128)
            socketPath = fetchd_socket_path(passed, &name, UInt(name.count)) > 0
                ? String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : "(socket from systemd)"
        } else {
            socketPath = SocketPath.resolve(flag: options.socketPath, environment: environment, uid: getuid())
            try SocketPath.prepare(socketPath: socketPath, uid: getuid())
        }
        try StartupFiles.check(options)
        engine = HTTPEngine(settings: EngineSettings(
            caFile: options.caFile, userAgent: "fetchd/\(FetchdVersion.text)", spinMicroseconds: options.spinMicroseconds,
            smallRequestThreads: options.engineThreads))
        // Loaded before the socket exists, so the first request already sees the cookies.
        let cookieFile = options.cookieFile.map { [engine, log] in CookiePersister(path: $0, engine: engine, log: log) }
        cookieFile?.start()
        self.cookieFile = cookieFile
        let limits = try RuntimeSetup.scheduler(options)
        let admission = HostAdmission(scheduler: limits)
        let shared = options.redis.map { [log] in SharedAdmission(url: $0, limits: admission, log: log) }
        let httpLog = HTTPLog(defaultDirectory: options.httpLogDirectory(environment: environment), log: log)
        self.httpLog = httpLog
        let tasks = WorkerThreads(name: "fetchd-tasks", count: WorkerThreads.defaultCount)
        let blocking = WorkerThreads(name: "fetchd-blocking", count: 4)
        let policy = FilePolicy(allowedDirectories: options.allowedDirectories)
        let clock: @Sendable () -> Double = { [admission] in admission.now }
        let fetcher = CredentialFetcher(engine: engine, blocking: blocking, now: clock)
        let metrics = Metrics()
        let credentials = CredentialStore(now: clock, log: log) { rule, request, done in
            metrics.count(.authFetches)
            fetcher.fetch(rule, for: request) { result in
                if case .failure = result { metrics.count(.authFailures) }
                done(result)
            }
        }
        self.credentials = credentials
        setup = RuntimeSetup(admission: admission, credentials: credentials, httpLog: httpLog, policy: policy, log: log,
                             limits: limits.limits)
        try setup.start(options)
        let cork = WriteCork()
        let stubs = StubStore(implicitSet: options.stubsFile == nil ? nil : "default", offline: options.offline,
                              storeCookies: { [engine] cookies, jar in engine.store(cookies, inJar: jar) { _ in } })
        if let file = options.stubsFile {
            do {
                let loaded = try stubs.load(startupFile: file, policy: policy)
                log.info("--stubs \(file): \(loaded) stub(s)")
            } catch {
                let refused = ErrorMapping.rpcError(for: error)
                let field = refused.data?["field"]?.stringValue.map { "\($0): " } ?? ""
                throw StartupError("--stubs \(file): \(field)\(refused.data?["detail"]?.stringValue ?? refused.message)")
            }
        }
        let clients = ClientDirectory()
        let events = JobEvents(clients: clients, metrics: metrics)
        let durable = DurableStore(directory: options.stateDirectory(environment: environment), log: log,
                                   onForbiddenThread: { [engine] in engine.isEngineThread })
        self.durable = durable
        let cache = try HTTPCache.open(options: options, environment: environment, blocking: blocking, engine: engine,
                                       gate: HostGate(admission: admission, shared: shared), log: log, httpLog: httpLog)
        self.cache = cache
        let jobs = JobRegistry(services: JobServices(
            engine: engine, admission: admission, credentials: credentials, httpLog: httpLog, log: log,
            answers: Self.answerThread(smallRequestThreads: options.engineThreads, cork: cork),
            tasks: tasks, blocking: blocking,
            timers: DispatchQueue(label: "fetchd.retry-waits"), stubs: stubs, durable: durable, metrics: metrics,
            events: events, cache: cache, shared: shared))
        self.jobs = jobs
        let driver = JobDriver(jobs: jobs)
        let startedAt = ContinuousClock.now
        let download = DownloadMethod(driver: driver, policy: policy), upload = UploadMethod(driver: driver, policy: policy)
        resumeDurable = { record in
            if record.method == UploadMethod.name { try upload.resume(record) } else { try download.resume(record) }
        }

        // The server exists only after the methods, but getStatus asks it for a count.
        let serverBox = ServerBox()
        let metricsSources = MetricsSources(
            metrics: metrics, engine: engine, admission: admission, jobs: jobs, stubs: stubs,
            connections: { serverBox.server?.connectionCount ?? 0 },
            more: cache.map { cache in [{ cache.metricFamilies() }] } ?? [])
        let metricsLog = log
        metricsListener = try options.metricsListen.map { address in
            try MetricsListener(address, log: metricsLog) { MetricsReport.prometheusText(metricsSources.families()) }
        }
        let methods: [any RPCMethod] = [
            PingMethod(),
            GetStatusMethod(jobs: jobs, httpLog: httpLog, startedAt: startedAt, shared: shared) { serverBox.server?.connectionCount ?? 0 },
            FetchMethod(driver: driver, policy: policy),
            download,
            upload,
            CancelMethod(jobs: jobs),
            ListJobsMethod(jobs: jobs),
            GetJobMethod(jobs: jobs),
            AttachMethod(jobs: jobs),
            SetRateLimitMethod(admission: admission, shared: shared),
            SetLoggingMethod(httpLog: httpLog),
            GetLoggingMethod(httpLog: httpLog),
            GetRateLimitsMethod(admission: admission, shared: shared),
            GetCookiesMethod(engine: engine),
            SetCookiesMethod(engine: engine),
            ClearCookiesMethod(engine: engine),
            SetAuthMethod(store: credentials, policy: policy, blocking: blocking),
            GetAuthMethod(store: credentials),
            AddStubMethod(stubs: stubs, policy: policy),
            RemoveStubsMethod(stubs: stubs),
            GetStubsMethod(stubs: stubs),
            SetStubModeMethod(stubs: stubs),
            LoadStubsMethod(stubs: stubs, policy: policy),
            RecordStubsMethod(stubs: stubs, policy: policy, log: log),
            GetMetricsMethod(sources: metricsSources),
            SubscribeMethod(events: events, jobs: jobs),
            UnsubscribeMethod(events: events),
            GetCacheStatsMethod(cache: cache),
            PurgeCacheMethod(cache: cache),
        ]
        let dispatcher = RPCDispatcher(methods: methods, mapError: ErrorMapping.rpcError(for:))
        let log = self.log
        let hooks = Connection.Hooks(
            prepare: { line, context, later in dispatcher.prepare(line: line, context: context, later: later) },
            answer: { message, context in await dispatcher.answer(message: message, context: context) },
            maxMessageBytes: options.maxMessageBytes,
            unfinishedLines: UnfinishedLines(maxMessageBytes: options.maxMessageBytes),
            cork: cork,
            tasks: tasks,
            opened: { id, budget in jobs.connectionOpened(id, budget: budget) },
            vanished: { id in
                log.debug("connection \(id): peer gone; cancelling its jobs")
                jobs.connectionVanished(id)
            },
            closed: { id in
                log.debug("connection \(id) closed")
                events.unsubscribe(id)
                jobs.connectionClosed(id)
            })
        server = try SocketServer(path: socketPath, hooks: hooks, log: log, passed: systemd.listenFD, clients: clients,
                                  threads: engine.smallRequestThreads)
        serverBox.server = server
        watchdogTimer = systemd.watchdogMicroseconds.map { [server] usec in
            // Pinged from the thread that serves the socket, at half the interval: a daemon
            // whose loop is stuck stops pinging and systemd restarts it.
            let timer = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "fetchd.watchdog"))
            let interval = DispatchTimeInterval.microseconds(max(1, usec / 2))
            timer.schedule(deadline: .now() + interval, repeating: interval)
            timer.setEventHandler { server.onLoop { systemd.notify("WATCHDOG=1", log: log) } }
            return timer
        }
    }

    public func start() {
        // Each small-request engine thread reads its connections' requests and runs their
        // transfers: no hand-off between them.
        let engine = self.engine
        // Before the socket is served: a client's new job cannot take a resumed job's id.
        resumeDurableJobs()
        server.start { thread, fd, onReadable, beforeWait in
            engine.watch(fd, onThread: thread, onReadable: onReadable, beforeWait: beforeWait)
        }
        log.notice("fetchd \(FetchdVersion.text) listening on \(socketPath)\(systemd.listenFD == nil ? "" : " (socket from systemd)")")
        systemd.notify("READY=1\nSTATUS=listening on \(socketPath)\nMAINPID=\(getpid())", log: log)
        watchdogTimer?.resume()
        if let metricsListener {
            metricsListener.start()
            log.notice("metrics at http://\(metricsListener.address)/metrics")
        }
    }

    /// Every durable job the daemon before left unfinished starts again, with its jobId, in
    /// its host's queue like any other job. One that can no longer start is logged and
    /// removed from the store.
    private func resumeDurableJobs() {
        let records = durable.unfinished()
        guard !records.isEmpty else { return }
        var resumed = 0
        for record in records {
            if record.crashes >= DurableStore.maxCrashes {
                log.error("durable job \(record.jobID) not resumed: the daemon died while it was unfinished "
                          + "\(record.crashes) times in a row (it may be what kills it); removed from \(durable.databasePath)")
                durable.remove(jobID: record.jobID)
                continue
            }
            do {
                try resumeDurable(record)
                resumed += 1
            } catch {
                let refused = ErrorMapping.rpcError(for: error)
                log.error("durable job \(record.jobID) not resumed: \(refused.data?["detail"]?.stringValue ?? refused.message)")
                durable.remove(jobID: record.jobID)
            }
        }
        log.notice("resumed \(resumed) durable job(s) from \(durable.databasePath)")
    }

    /// SIGHUP: reads --config FILE again (operations.md, "The config file"). What can change
    /// while running changes (no job is stopped); what cannot is said in the log. A file
    /// that is no longer valid changes nothing.
    public func hangUp() {
        let current = running.withLock { $0 }
        guard let path = current.configPath else {
            log.notice("SIGHUP: no --config file; nothing to reload")
            return
        }
        let new: DaemonOptions
        do {
            new = try ConfigFile.load(path: path, arguments: current.arguments)
            try setup.reload(to: new)
        } catch {
            log.error("SIGHUP: \(error); the running settings stay as they were")
            return
        }
        for option in DaemonOptions.changed(from: current, to: new) where !option.runtime {
            log.notice("SIGHUP: \(option.key.isEmpty ? option.name : option.key) changed in \(path); it takes effect when fetchd restarts")
        }
        for (key, changed) in [("cache", current.configSections?.cache != new.configSections?.cache),
                               ("redis", current.configSections?.redis != new.configSections?.redis)] where changed {
            log.notice("SIGHUP: \(key) changed in \(path); it takes effect when fetchd restarts")
        }
        running.withLock { $0 = new }
        log.notice("SIGHUP: reloaded \(path)")
    }

    /// Stops as protocol.md says: no new connections or jobs, running jobs get the grace
    /// period, then the rest are answered "cancelled by shutdown"; every answer is flushed,
    /// the socket file removed.
    public func shutdown() {
        log.notice("stopping")
        systemd.notify("STOPPING=1", log: log)
        server.stopListening()
        metricsListener?.stop()
        jobs.beginShutdown()
        if let stopped = cache?.stopBackground(), stopped > 0 {
            log.info("stopping: \(stopped) background revalidation(s) cancelled")
        }
        waitUntil(seconds: running.withLock { $0.shutdownGraceSeconds }) { self.jobs.liveCount == 0 }
        jobs.cancelAll(by: .shutdown)
        waitUntil(seconds: 5) { self.jobs.liveCount == 0 && self.server.allDrained }
        durable.stoppedCleanly()
        httpLog.flush()
        server.closeAll()
        cookieFile?.stop()
        engine.shutdown()
        watchdogTimer?.cancel()
        log.notice("stopped")
    }

    private func waitUntil(seconds: Double, _ condition: () -> Bool) {
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        while !condition() && ContinuousClock.now < deadline {
            usleep(5_000)
        }
    }
}

/// Lets a method reach the server that is created after it.
private final class ServerBox: @unchecked Sendable {
    // Written once during Daemon.init, before any connection can exist.
    var server: SocketServer?
}

extension Daemon {
    /// The answer thread, when the machine has a core for it beside the small-request threads.
    /// Where it has none (2 cores, 2 such threads: `make bench`'s machine), answers handed to it
    /// only take turns on the same cores, with a hand-off each: at c=64, in 14 alternating
    /// rounds of 20,000 GETs, answers made where the transfer ended won 10, at 75 against 91
    /// and 68 against 76 us of CPU per request.
    static func answerThread(smallRequestThreads: Int, cork: WriteCork) -> WorkerThreads? {
        guard Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))) > smallRequestThreads else { return nil }
        return WorkerThreads(name: "fetchd-answers", count: 1, burst: { cork.around($0) })
    }
}
