import FetchEngine
import Dispatch
import FoundationEssentials
import Glibc
import JSONRPC

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
    /// Starts the durable jobs a daemon before left unfinished (`start`).
    private let resumeDurable: @Sendable (DurableStore.Record) throws -> Void

    public init(options: DaemonOptions, environment: [String: String]) throws {
        self.options = options
        log = Logger(minimum: options.verbose ? .debug : .notice)
        if let limit = FileLimit.raiseSoftToHard() {
            log.info(limit.from == limit.to
                ? "open-file limit \(limit.to) (the hard limit)"
                : "open-file limit raised from \(limit.from) to \(limit.to) (the hard limit)")
        }
        socketPath = SocketPath.resolve(flag: options.socketPath, environment: environment, uid: getuid())
        try SocketPath.prepare(socketPath: socketPath, uid: getuid())
        engine = HTTPEngine(settings: EngineSettings(
            caFile: options.caFile, userAgent: "fetchd/\(FetchdVersion.text)", spinMicroseconds: options.spinMicroseconds))
        // Loaded before the socket exists, so the first request already sees the cookies.
        let cookieFile = options.cookieFile.map { [engine, log] in CookiePersister(path: $0, engine: engine, log: log) }
        cookieFile?.start()
        self.cookieFile = cookieFile
        var rateFile: String? = nil
        if let path = options.configPath {
            do {
                rateFile = try String(contentsOfFile: path, encoding: .utf8)
            } catch {
                // The reason in the C library's words ("No such file or directory").
                let reason = access(path, R_OK) == 0 ? "not UTF-8 text" : String(cString: strerror(errno))
                throw StartupError("cannot read --config \(path): \(reason)")
            }
        }
        let admission: HostAdmission
        do {
            admission = HostAdmission(scheduler: try RateLimitConfig.scheduler(options: options, file: rateFile))
        } catch {
            throw StartupError("--config \(options.configPath ?? ""): \(error)")
        }
        let shared = options.redis.map { [log] in SharedAdmission(url: $0, limits: admission, log: log) }
        let httpLog = HTTPLog(defaultDirectory: options.httpLogDirectory(environment: environment), log: log)
        self.httpLog = httpLog
        let tasks = WorkerThreads(name: "fetchd-tasks", count: WorkerThreads.defaultCount)
        let blocking = WorkerThreads(name: "fetchd-blocking", count: 4)
        let policy = FilePolicy(allowedDirectories: options.allowedDirectories)
        let clock: @Sendable () -> Double = { [admission] in admission.now }
        let fetcher = CredentialFetcher(engine: engine, blocking: blocking, now: clock)
        let credentials = CredentialStore(now: clock, log: log) { rule, request, done in
            fetcher.fetch(rule, for: request, done: done)
        }
        self.credentials = credentials
        if let path = options.authFile {
            let rules = try AuthFile.rules(path: path, policy: policy)
            rules.forEach(credentials.set)
            log.info("loaded \(rules.count) auth rule(s) from --auth-file \(path)")
        }
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
        let durable = DurableStore(directory: options.stateDirectory(environment: environment), log: log)
        self.durable = durable
        let jobs = JobRegistry(services: JobServices(
            engine: engine, admission: admission, credentials: credentials, httpLog: httpLog, log: log,
            answers: WorkerThreads(name: "fetchd-answers", count: 1, burst: { cork.around($0) }),
            tasks: tasks, blocking: blocking,
            timers: DispatchQueue(label: "fetchd.retry-waits"), stubs: stubs, durable: durable, shared: shared))
        self.jobs = jobs
        let driver = JobDriver(jobs: jobs)
        let startedAt = ContinuousClock.now
        let download = DownloadMethod(driver: driver, policy: policy), upload = UploadMethod(driver: driver, policy: policy)
        resumeDurable = { record in
            if record.method == UploadMethod.name { try upload.resume(record) } else { try download.resume(record) }
        }

        // The server exists only after the methods, but getStatus asks it for a count.
        let serverBox = ServerBox()
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
            SetAuthMethod(store: credentials, policy: policy),
            GetAuthMethod(store: credentials),
            AddStubMethod(stubs: stubs, policy: policy),
            RemoveStubsMethod(stubs: stubs),
            GetStubsMethod(stubs: stubs),
            SetStubModeMethod(stubs: stubs),
            LoadStubsMethod(stubs: stubs, policy: policy),
            RecordStubsMethod(stubs: stubs, policy: policy, log: log),
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
                jobs.connectionClosed(id)
            })
        server = try SocketServer(path: socketPath, hooks: hooks, log: log)
        serverBox.server = server
    }

    public func start() {
        // One thread reads requests and runs the transfers: no hand-off between them.
        let engine = self.engine
        // Before the socket is served: a client's new job cannot take a resumed job's id.
        resumeDurableJobs()
        server.start { fd, onReadable in engine.watch(fd, onReadable: onReadable) }
        log.notice("fetchd \(FetchdVersion.text) listening on \(socketPath)")
    }

    /// Every durable job the daemon before left unfinished starts again, with its jobId, in
    /// its host's queue like any other job. One that can no longer start is logged, its
    /// file removed.
    private func resumeDurableJobs() {
        let records = durable.unfinished()
        guard !records.isEmpty else { return }
        var resumed = 0
        for record in records {
            do {
                try resumeDurable(record)
                resumed += 1
            } catch {
                let refused = ErrorMapping.rpcError(for: error)
                log.error("durable job \(record.jobID) not resumed: \(refused.data?["detail"]?.stringValue ?? refused.message)")
                durable.remove(jobID: record.jobID)
            }
        }
        log.notice("resumed \(resumed) durable job(s) from \(durable.jobsDirectory)")
    }

    /// SIGHUP: nothing to reload yet, and it must not stop the daemon.
    public func hangUp() {
        log.notice("SIGHUP ignored: config reload comes with --config")
    }

    /// Stops as protocol.md says: no new connections or jobs, running jobs get the grace
    /// period, then the rest are answered "cancelled by shutdown"; every answer is flushed,
    /// the socket file removed.
    public func shutdown() {
        log.notice("stopping")
        server.stopListening()
        jobs.beginShutdown()
        waitUntil(seconds: options.shutdownGraceSeconds) { self.jobs.liveCount == 0 }
        jobs.cancelAll(by: .shutdown)
        waitUntil(seconds: 5) { self.jobs.liveCount == 0 && self.server.allDrained }
        httpLog.flush()
        server.closeAll()
        cookieFile?.stop()
        engine.shutdown()
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
