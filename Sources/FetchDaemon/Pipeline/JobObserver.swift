import FetchEngine
import JSONRPC

/// What sees a job's life and changes nothing in it, as OkHttp's EventListener beside its
/// interceptors: HTTP logs, the durable journal, job events, metrics. `Pipeline.observers`
/// lists them, in order, beside the stages; `JobDriver` tells each of them every event, on
/// the thread where it happens (an engine thread for most: an observer never waits there,
/// and hands disk work to the blocking threads). Like a stage, an observer may keep per-job
/// state in the job (`PipelineMember.State`).
protocol JobObserver: PipelineMember {
    /// The job is registered and about to begin. A throw refuses it before anything is sent
    /// (the client gets the error): the durable journal could not write it down.
    func jobQueued(_ job: Job) throws
    /// Every stage has prepared the attempt: it goes to the engine, or to a stage's
    /// substitute. The request is still the observer's to mark for recording
    /// (`recordsExchange`): the only change an observer makes.
    func attemptStarted(_ attempt: Attempt, _ job: Job)
    /// The attempt ended with `outcome` (as it came, before the stages judged it), from
    /// `source` (nil: it ended before it started: a refused queue, a file that cannot be
    /// opened), and the stages judged it: `decision` comes next.
    func attemptEnded(_ attempt: Attempt, _ outcome: AttemptOutcome, from source: AttemptSource?,
                      then decision: JobMachine.Decision, _ job: Job)
    /// Another attempt, number `attempt`, follows after `delay` seconds.
    func retrying(_ job: Job, delay: Double, attempt: Int, reason: String)
    /// The job is answered (before its answer is sent).
    func jobEnded(_ job: Job, _ ending: JobEnding)
}

extension JobObserver {
    func jobQueued(_ job: Job) throws {}
    func attemptStarted(_ attempt: Attempt, _ job: Job) {}
    func attemptEnded(_ attempt: Attempt, _ outcome: AttemptOutcome, from source: AttemptSource?,
                      then decision: JobMachine.Decision, _ job: Job) {}
    func retrying(_ job: Job, delay: Double, attempt: Int, reason: String) {}
    func jobEnded(_ job: Job, _ ending: JobEnding) {}
}

/// Where an attempt's outcome came from.
enum AttemptSource: Sendable, Equatable {
    /// A transfer.
    case network
    /// A stage's answer in the engine's place, once every stage prepared it (a stub, a
    /// download from the cache).
    case substitute
    /// A stage's answer while it prepared the attempt (a cache hit, an only-if-cached 504,
    /// a deadline already past).
    case stage
}

/// How a job ended, as its stages and observers hear it: typed values, never its answer's
/// JSON.
enum JobEnding: Sendable {
    /// Answered with a result: the final response's status, and where a download landed.
    case finished(status: Int, landed: LandedFile?)
    /// Answered with an error (`JobFailed` for the network's, `AuthFailed`...).
    case failed(any Error)
    case cancelled(CancelReason)

    var succeeded: Bool {
        if case .finished = self { return true }
        return false
    }

    var isCancelled: Bool {
        if case .cancelled = self { return true }
        return false
    }
}

/// A download's file at its final path, as its answer reports it.
struct LandedFile: Sendable, Equatable {
    let path: String
    let bytes: Int64
}
