import Dispatch
import FetchEngine

/// The one place that lists what a job passes through: its stages, in order (outermost
/// first; the transfer itself comes after the last), which may change, answer, hold and judge
/// each attempt; and its observers, which see every event and change nothing. To add a
/// concern to every request, write one file with a `Stage` (or a `JobObserver`) and add one
/// line to `common` (or `observers`).
enum Pipeline {
    /// Every job's stages: the redirect the daemon follows sends the step to its hop (first,
    /// so every stage prepares the hop's request); cookies choose the jar; a stub set may
    /// decide to answer in the network's place (decided here, before any credential is
    /// fetched: a request a stub answers runs no auth rule; the answer itself is made where
    /// the transfer would start, after the limits, and judged by the retry policy); the host's
    /// auth rule adds its credential (before the host's limits: a request waiting for a
    /// credential holds no host slot); the cache answers or validates (before the limits: a
    /// hit takes no host slot); the host's limits admit the attempt (and honour Retry-After);
    /// the server's rate limit headers pause the host when they say its budget is spent; the
    /// transfer draws from its host's and the daemon's bandwidth budgets; the request's maxTime (after the host's wait, so each attempt's timeouts are cut to what is
    /// left) ends the job at its deadline and refuses a retry past it; the retry policy judges
    /// the outcome.
    static func common(admission: HostAdmission, shared: SharedAdmission?, credentials: CredentialStore, log: Logger,
                       stubs: StubStore, timers: DispatchQueue, metrics: Metrics, cache: HTTPCache? = nil,
                       clock: JobClock = .system) -> [any Stage] {
        [
            RedirectStage(),
            CookieStage(),
            StubStage(stubs: stubs, timers: timers, clock: clock),
            CredentialStage(store: credentials),
            CacheStage(cache: cache),
            HostLimitStage(admission: admission, shared: shared, log: log, metrics: metrics, clock: clock),
            ServerLimitStage(gate: HostGate(admission: admission, shared: shared, clock: clock), log: log),
            BandwidthStage(admission: admission),
            DeadlineStage(clock: clock),
            RetryStage(clock: clock),
        ]
    }

    /// Every job's observers, told in this order: the durable journal (first: a job it cannot
    /// write down is refused before anyone hears of it), job events, HTTP logs, metrics.
    static func observers(durable: DurableStore?, events: JobEvents?, httpLog: HTTPLog, metrics: Metrics,
                          engine: HTTPEngine, blocking: WorkerThreads, clock: JobClock) -> [any JobObserver] {
        var observers: [any JobObserver] = [DurableJournal(store: durable, blocking: blocking,
                                                           onEngineThread: { [engine] in engine.isEngineThread })]
        if let events { observers.append(events) }
        observers.append(httpLog)
        observers.append(MetricsObserver(metrics: metrics, clock: clock))
        return observers
    }

    /// A kind's stages: the common ones (made once, in JobServices), then the kind's own,
    /// nearest the network (a download's part file, a resumable upload's session).
    static func stages(_ services: JobServices, adding own: [any Stage] = []) -> [any Stage] {
        // `+` would copy the shared array even to add nothing (a fetch adds nothing).
        own.isEmpty ? services.commonStages : services.commonStages + own
    }
}
