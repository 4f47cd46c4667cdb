import FetchEngine
import JSONRPC

/// One concern of a request's life (host limits, retries, a download's part file, ...): a
/// stage may change each attempt's request, answer it without the network, hold it until
/// something allows it, and judge how it ended. `Pipeline` lists the stages of every kind of
/// job, in order, in one place, beside the observers; `JobDriver` calls them:
///
/// - `prepare`, in the chain's order, before every attempt (and `answerAfterHold` when the
///   stage's hold releases it);
/// - `ended`, in reverse order, after every attempt that a stage prepared (whatever happens
///   next: this is where a stage gives back what it took);
/// - `judge`, in reverse order (the stage nearest the network first), until one decides: the
///   outcome is final, or another attempt follows; then `review`, in the same order;
/// - `jobEnded`, once, when the job is answered.
///
/// What a stage keeps for a job lives in the job (`State`, `Job.withState(of:)`), never in
/// the stage, the attempt or the driver; shared services (the host's limits, the clock, the
/// blocking threads) come in through `JobServices`, and a stage never calls another.
/// Stages are classes: a job's list of them is a list of references (an existential of a
/// class is a pointer, copied with a retain). The stages of one job are called one at a
/// time, in the order of the job's life; `prepare` runs on a worker thread for jobs that use
/// local files (`JobSpec.preparesOnWorker`), so it may then do blocking file work.
protocol Stage: PipelineMember {
    func prepare(_ attempt: Attempt, _ job: Job) throws -> Preparation
    /// The stage's hold released the attempt: what it found may answer it now, as `.answer`
    /// would (a cache hit, read from disk off the engine thread); nil: the attempt goes on.
    func answerAfterHold(_ attempt: Attempt, _ job: Job) -> AttemptOutcome?
    func ended(_ attempt: Attempt, _ outcome: AttemptOutcome, _ job: Job)
    func judge(_ attempt: Attempt, _ outcome: AttemptOutcome, _ job: Job) -> Verdict
    /// The attempt is judged (`decision`, nearest the network first): a stage may still end
    /// the job instead of a retry (a wait past the deadline), or amend a final outcome (a
    /// redirect the daemon followed counts its hops in).
    func review(_ attempt: Attempt, _ decision: inout JobMachine.Decision, _ outcome: inout AttemptOutcome, _ job: Job)
    /// The job is answered: how it ended (its status and a download's file, or why it failed
    /// or was cancelled).
    func jobEnded(_ job: Job, _ ending: JobEnding)
}

extension Stage {
    func prepare(_ attempt: Attempt, _ job: Job) throws -> Preparation { .proceed }
    func answerAfterHold(_ attempt: Attempt, _ job: Job) -> AttemptOutcome? { nil }
    func ended(_ attempt: Attempt, _ outcome: AttemptOutcome, _ job: Job) {}
    func judge(_ attempt: Attempt, _ outcome: AttemptOutcome, _ job: Job) -> Verdict { .pass }
    func review(_ attempt: Attempt, _ decision: inout JobMachine.Decision, _ outcome: inout AttemptOutcome, _ job: Job) {}
    func jobEnded(_ job: Job, _ ending: JobEnding) {}
}

/// What the stages tell about a job, as typed values, as they learn it (`Job.updateReport`):
/// the answer's `timings.queuedMs`, `cache` and `stub`, and the HTTP log's cache object.
struct JobReport: Sendable {
    /// Milliseconds the last attempt waited in its host's queue.
    var queuedMs = 0.0
    /// What the HTTP cache did (nil: no cache).
    var cache: CacheOutcome?
    /// The stored response the cache answered with, or validated.
    var cacheEntry: StoredResponse?
    /// The stub that answered the last attempt.
    var stub: String?
}

extension Job {
    /// The host whose limits apply to the attempt: its own URL's (a resumable upload's
    /// session URL, a redirect's hop may name another host).
    func host(of attempt: Attempt) -> HostKey {
        // Most attempts go to the request's own URL, parsed once already.
        if attempt.request.url == spec.request.url { return spec.host }
        return (try? RequestURL(attempt.request.url)).map(HostKey.init) ?? spec.host
    }
}

/// One attempt, as the stages prepare it. A reference, handed along without copying the
/// request; like a job's stages, it is touched by one step at a time.
final class Attempt: @unchecked Sendable {
    /// 1 for the first attempt.
    let number: Int
    var request: HTTPRequest
    /// Secrets the attempt carries (a credential an auth rule added, and those of the
    /// redirect hops before it): HTTP logs and `exchange` mask them whatever `redact` says.
    var secrets: [String] = []
    /// Only the network may answer the attempt: set by a stage that records what the server
    /// answers (a job recordStubs records), so no stage answers from elsewhere (the cache).
    var networkOnly = false
    /// Set by a stage that answers in the network's place once every stage has prepared the
    /// attempt (a stub: a download's part file is known by then, and every stage judges it).
    var substitute: Substitute?
    /// When it was handed to the engine or to its substitute, on the job's clock.
    var launchedAt = 0.0

    init(number: Int, request: HTTPRequest) {
        self.number = number
        self.request = request
    }
}

/// How an attempt ended: the answer, or why there was none (a JobFailed for the network).
typealias AttemptOutcome = Result<HTTPResponse, any Error>

extension Result where Success == HTTPResponse {
    /// The answer's status, read without binding (copying) the whole response.
    var successStatus: Int? {
        if case .success(let response) = self { return response.status }
        return nil
    }
}

/// What a stage does with an attempt before it is sent.
enum Preparation: Sendable {
    case proceed
    /// The attempt ends with this outcome, without the network (a cache hit); the stages
    /// after this one neither prepare nor judge it (see `Substitute` for an answer they do).
    case answer(AttemptOutcome)
    /// The attempt waits until the hold releases it.
    case hold(Hold)
}

/// A wait a stage imposes: `start` calls its argument exactly once, when the attempt may go
/// on (or with the error that ends it); `cancel` gives up the wait.
struct Hold: Sendable {
    let start: @Sendable (_ release: @escaping @Sendable (Result<Void, any Error>) -> Void) -> Void
    let cancel: @Sendable (_ error: any Error) -> Void
}

/// An answer made instead of a transfer, when the attempt would be handed to the engine: it
/// counts as an attempt, its outcome passes `ended` and `judge` as a transfer's does, and HTTP
/// logs and progress see it. `answer` runs on the thread that prepared the attempt (the
/// blocking threads for jobs that use local files, so it may write a download's part file).
struct Substitute: Sendable {
    struct Made: Sendable {
        var outcome: Result<HTTPResponse, TransferError>
        /// Added to the -32001 error's data when the outcome is a failure (a stub miss's `nearest`).
        var failureData: JSONObject? = nil
    }

    let answer: @Sendable (_ attempt: Attempt, _ job: Job) -> Made
}

/// A stage's judgement of an attempt.
enum Verdict: Sendable {
    /// No opinion: ask the next stage (none left: the outcome is final).
    case pass
    /// The outcome is final; stop asking.
    case final
    /// The job fails with this error instead (an answer the protocol does not allow).
    case fail(any Error)
    /// A retry: another attempt after `delay` seconds (the client hears `retrying`).
    case again(delay: Double, reason: String)
    /// The job's next step, at once (a resumable upload's next chunk, a download that starts
    /// over): not a retry.
    case next
    /// The redirect the daemon follows (`RedirectFollowing`): the job's next step goes to the
    /// hop at once, as the same attempt.
    case follow
}
