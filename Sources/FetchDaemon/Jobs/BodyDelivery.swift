import FetchEngine
import JSONRPC

/// Where a fetch's response body goes, one per job, made by the method from the request:
///
/// - `WholeBodyDelivery`: kept in memory and put in the answer (`body`, `bodyBase64`, `json`);
///   every fetch without a streaming mode. It streams nothing, so the job does not carry it
///   (`JobSpec.delivery` is nil): the answer alone uses it.
/// - `DescriptorDelivery`: written to the descriptor the client passed (`bodyTo: "fd"`).
/// - `NotificationDelivery`: `responseHead`, then `bodyChunk` notifications
///   (`responseBody: "stream"`). Other notification modes are one more implementation each,
///   sending through a `NotificationOutlet`.
///
/// A delivery that streams is `JobSpec.delivery` (owned by the job), and its `receiver` is the
/// engine's `BodyReceiver` for every attempt (the base request's `ResponseDestination.stream`):
/// `begin` hears each response head and takes the body only when the head is final
/// (`StreamCommit.isFinal`: no stage could still retry it); `receive` takes the pieces on the
/// engine thread and answers `.pause` while the client is behind. A body that did not stream (a
/// stub's answer, a cache hit, a body kept in memory because its head could still have been
/// retried) is delivered by `deliverRest` before the answer is made (`JobDriver.finish`). Once
/// `delivered` is set, `BodyDeliveryStage` (judged first, nearest the network) lets no stage
/// retry the job, and a failure after it carries `data.streamed`.
protocol BodyDelivery: AnyObject, Sendable {
    /// The engine's receiver of each attempt's body; nil: the body stays in memory.
    var receiver: (any BodyReceiver)? { get }
    /// The job it delivers for, told before each attempt's transfer (on the thread that
    /// prepares it) and given to `deliverRest`: a delivery keeps what it needs of it (its id,
    /// its connection: a `NotificationOutlet`), never the job itself.
    func bind(_ job: Job)
    /// What reached the client so far (a head: 0, then the body's bytes); nil while nothing
    /// did. From the first delivery on, the job is not retried.
    var delivered: Int64? { get }
    /// The final response: delivers what did not stream, then calls `done` (from any thread)
    /// with why that failed, if it did. Never blocks the calling thread (an engine thread).
    func deliverRest(_ response: HTTPResponse, _ job: Job, then done: @escaping @Sendable ((any Error)?) -> Void)
    /// The result's members for the body (`bytes`, `sha256`, `body`...).
    func addResult(_ response: HTTPResponse, to result: inout JSONObject)
    /// How an attempt that ended is judged before any stage (`BodyDeliveryStage`): by
    /// default, once something was delivered the outcome is final (a failure with
    /// `data.streamed`); before that, `.pass`. A mode that reconnects by its own protocol
    /// (Server-Sent Events) answers otherwise.
    func judge(_ attempt: Attempt, _ outcome: AttemptOutcome, _ job: Job) -> Verdict
    /// The job has its answer: nothing more is delivered, and the descriptors the delivery
    /// holds are closed (once whatever still uses them has stopped).
    func close()
}

extension BodyDelivery {
    func judge(_ attempt: Attempt, _ outcome: AttemptOutcome, _ job: Job) -> Verdict {
        StreamCommit.verdict(delivered: delivered, outcome: outcome, job: job)
    }
}

/// The rules of a streamed body that are pure: when a head may stream, and how an attempt
/// ends once something was delivered.
enum StreamCommit {
    /// Whether a response's body may go to the client as it arrives: its head can no longer
    /// be turned into another attempt by a stage. Interim answers, redirects (the daemon may
    /// follow them), 304 (the cache's), 401 and 407 (a credential fetched again), 5xx (the
    /// cache's stale-if-error) and the statuses the job's retry policy retries are kept in
    /// memory, and delivered once the job settles on them (`deliverRest`).
    static func isFinal(status: Int, policy: RetryPolicy) -> Bool {
        guard status >= 200, status < 300 || (status >= 400 && status < 500) else { return false }
        if status == 401 || status == 407 { return false }
        return !(policy.enabled && policy.statuses.contains(status))
    }

    /// The verdict on an attempt once `delivered` bytes reached the client (nil: nothing did:
    /// no opinion). A failure then carries `data.streamed`.
    static func verdict(delivered: Int64?, outcome: AttemptOutcome, job: Job) -> Verdict {
        guard let delivered else { return .pass }
        guard case .failure(let failed as JobFailed) = outcome else { return .final }
        return .fail(streamedFailure(failed, delivered: delivered))
    }

    /// `failed` with `data.streamed`.
    static func streamedFailure(_ failed: JobFailed, delivered: Int64) -> JobFailed {
        var data = failed.data ?? JSONObject()
        data["streamed"] = .integer(delivered)
        return JobFailed(jobID: failed.jobID, attempts: failed.attempts, error: failed.error, data: data)
    }
}
