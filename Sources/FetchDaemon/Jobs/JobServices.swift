import Dispatch
import FetchEngine
import FoundationEssentials

/// What jobs run on: the engine, and the admission queue that applies every host's limits.
struct JobServices: Sendable {
    let engine: HTTPEngine
    let admission: HostAdmission
    let httpLog: HTTPLog
    let log: Logger
    /// Builds answers beside the engine thread when it is busy (nil: no core for it, every
    /// small answer is made where its job ended).
    let answers: WorkerThreads?
    /// Where jobs that wait (retries, queues, large answers) continue as tasks.
    let tasks: WorkerThreads
    /// Blocking file work (a part file's hash, fsync, landing): threads of their own.
    let blocking: WorkerThreads
    /// The waits between attempts. A serial queue: `DispatchQueue.global()` would start
    /// libdispatch's workqueue, whose monitor then wakes the process every second.
    let timers: DispatchQueue
    /// The stages every job passes through (Pipeline.common), made once.
    let commonStages: [any Stage]
    /// What sees every job (Pipeline.observers), made once.
    let observers: [any JobObserver]
    /// Stub sets (the stub stage answers from them).
    let stubs: StubStore
    /// Where durable jobs are written down (nil: durable jobs are refused).
    let durable: DurableStore?
    /// The daemon's counters (getMetrics).
    let metrics: Metrics
    /// jobEvent notifications to subscribers (nil: none are sent).
    let events: JobEvents?
    /// The HTTP cache (nil: no --cache-dir).
    let cache: HTTPCache?
    /// Shared limits through Redis (nil without `--redis`).
    let shared: SharedAdmission?
    /// The clocks stages and observers read.
    let clock: JobClock

    init(engine: HTTPEngine, admission: HostAdmission, credentials: CredentialStore, httpLog: HTTPLog, log: Logger,
         answers: WorkerThreads?, tasks: WorkerThreads, blocking: WorkerThreads, timers: DispatchQueue,
         stubs: StubStore = StubStore(), durable: DurableStore? = nil, metrics: Metrics = Metrics(),
         events: JobEvents? = nil, cache: HTTPCache? = nil, shared: SharedAdmission? = nil, clock: JobClock? = nil) {
        let clock = clock ?? JobClock(now: { [admission] in admission.now }, wall: { Date() })
        self.clock = clock
        self.durable = durable
        self.metrics = metrics
        self.events = events
        self.cache = cache
        self.shared = shared
        self.engine = engine
        self.admission = admission
        self.httpLog = httpLog
        self.log = log
        self.answers = answers
        self.tasks = tasks
        self.blocking = blocking
        self.timers = timers
        self.stubs = stubs
        commonStages = Pipeline.common(admission: admission, shared: shared, credentials: credentials, log: log, stubs: stubs,
                                       timers: timers, metrics: metrics, cache: cache, clock: clock)
        observers = Pipeline.observers(durable: durable, events: events, httpLog: httpLog, metrics: metrics, engine: engine,
                                       blocking: blocking, clock: clock)
    }

    /// Seconds on the monotonic clock (the machine's and the host scheduler's clock).
    var now: Double { clock.now() }
}
