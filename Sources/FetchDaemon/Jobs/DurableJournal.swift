/// Durable jobs written down (`DurableStore`, "Durable jobs" in protocol.md): a job's row
/// before its first byte is sent (a failure refuses the job), its retry budget after each
/// failed attempt that another follows (never per block), and the row removed when the job
/// ends, unless the daemon's shutdown stopped it (the next daemon resumes it). No disk work
/// on an engine thread: the retry budget is written on the blocking threads, and so is the
/// removal of a job that ended on one.
final class DurableJournal: JobObserver {
    struct State: DefaultJobState {
        /// The failures the row holds.
        var savedFailures = 0
    }

    /// nil: durable jobs are refused.
    let store: DurableStore?
    /// Where the store's writes go when they must not wait on the calling thread.
    let blocking: WorkerThreads
    /// Whether the caller is an engine thread (`HTTPEngine.isEngineThread`).
    let onEngineThread: @Sendable () -> Bool

    init(store: DurableStore?, blocking: WorkerThreads, onEngineThread: @escaping @Sendable () -> Bool) {
        self.store = store
        self.blocking = blocking
        self.onEngineThread = onEngineThread
    }

    func initialState(_ job: Job) -> State {
        State(savedFailures: job.spec.durableRecord?.retry.failures ?? 0)
    }

    func jobQueued(_ job: Job) throws {
        guard let record = job.spec.durableRecord else { return }
        // Written down (fsync) before the first byte is sent.
        guard let store else { throw NotAllowed(detail: "durable jobs need a state directory") }
        try store.save(record)
    }

    func attemptEnded(_ attempt: Attempt, _ outcome: AttemptOutcome, from source: AttemptSource?,
                      then decision: JobMachine.Decision, _ job: Job) {
        guard job.durable, decision != .final, let store else { return }
        let retry = job.retry
        let counted = job.withState(of: self) { state in
            defer { state.savedFailures = max(state.savedFailures, retry.failures) }
            return retry.failures > state.savedFailures
        }
        guard counted else { return }
        let row = DurableStore.Retry(attempts: job.attempts, failures: retry.failures, waited: retry.waited, jitter: retry.jitter)
        blocking.execute { store.saveRetry(jobID: job.id, row) }
    }

    func jobEnded(_ job: Job, _ ending: JobEnding) {
        guard job.durable, let store else { return }
        if case .cancelled(.shutdown) = ending { return }
        if onEngineThread() {
            blocking.execute { store.remove(jobID: job.id) }
        } else {
            // Here and now when the thread may wait (a download lands on the blocking
            // threads): a stop right after the answer cannot leave the row behind.
            store.remove(jobID: job.id)
        }
    }
}
