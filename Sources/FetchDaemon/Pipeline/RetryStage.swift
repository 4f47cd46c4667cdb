import FetchEngine
import FoundationEssentials

/// The request's retry policy (RetryPolicy: backoff with jitter, Retry-After, the statuses
/// and failures worth another try, the attempt budget). Only statuses and transfer failures
/// are retried, never a cancel or a local error.
final class RetryStage: Stage {
    func judge(_ attempt: Attempt, _ outcome: AttemptOutcome, _ job: Job) -> Verdict {
        let judged: RetryPolicy.Outcome
        switch outcome {
        case .success(let answer):
            judged = .status(answer.status, retryAfter: answer.headers.last(named: "Retry-After"))
        case .failure(let failed as JobFailed):
            judged = .failure(failed.error.kind)
        case .failure:
            return .final
        }
        if judged.isFinalSuccess { return .pass }
        var state = job.pipeline.retry
        // Drawn at the first retry: no getrandom per request.
        if state.jitter == nil { state.jitter = Double.random(in: 0..<1) }
        state.failures += 1
        let elapsed = ContinuousClock.now - job.startedAt
        let decision = job.spec.retryPolicy.decide(attempt: state.failures, outcome: judged, waitedSoFar: state.waited,
                                                   jitter: state.jitter ?? 0, now: Date(),
                                                   elapsed: Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
        guard case .retry(let wait, let reason) = decision else {
            job.pipeline.retry = state
            return .pass
        }
        state.waited += wait
        job.pipeline.retry = state
        if DeadlineStage.refusesWait(wait, job) { return .fail(DeadlineStage.expired(job, attempts: attempt.number)) }
        return .again(delay: wait, reason: reason)
    }
}

/// A job's retry bookkeeping across its attempts.
struct RetryState: Sendable {
    var jitter: Double?
    /// Attempts judged worth another try (a resumable upload's chunks are not failures).
    var failures = 0
    var waited = 0.0
}
