import FetchEngine
import FoundationEssentials

/// The request's retry policy (RetryPolicy: backoff with jitter, Retry-After, the statuses
/// and failures worth another try, the attempt budget). Only statuses and transfer failures
/// are retried, never a cancel or a local error.
final class RetryStage: Stage {
    let clock: JobClock

    init(clock: JobClock = .system) {
        self.clock = clock
    }

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
        let now = clock.wall(), elapsed = job.elapsed
        // Drawn at the first retry: no getrandom per request.
        let decision = job.withRetry { retry in
            retry.judge(judged, policy: job.spec.retryPolicy, now: now, elapsed: elapsed, drawJitter: { Double.random(in: 0..<1) })
        }
        guard case .retry(let wait, let reason) = decision else { return .pass }
        return .again(delay: wait, reason: reason)
    }
}

/// A job's retry bookkeeping across its attempts, and across daemon restarts for a durable
/// job: `DurableStore` writes it down after each failed attempt that is followed by another
/// one, and a resumed job starts from what was written (a restart is not a failed attempt).
struct RetryState: Sendable, Equatable {
    var jitter: Double?
    /// Attempts judged worth another try (a resumable upload's chunks are not failures): what
    /// the policy's `maxAttempts` counts.
    var failures = 0
    /// Seconds waited between attempts (the 3 x maxInterval budget).
    var waited = 0.0
    /// Seconds the job had lived before this daemon resumed it (from its first start, by the
    /// wall clock): `maxElapsed` counts them too.
    var priorElapsed = 0.0

    /// The policy's decision on one more failure (pure: the clock and the jitter are passed
    /// in). `elapsed`: seconds since this daemon started the job.
    mutating func judge(_ outcome: RetryPolicy.Outcome, policy: RetryPolicy, now: Date, elapsed: Double,
                        drawJitter: () -> Double) -> RetryPolicy.Decision {
        if jitter == nil { jitter = drawJitter() }
        failures += 1
        let decision = policy.decide(attempt: failures, outcome: outcome, waitedSoFar: waited, jitter: jitter ?? 0, now: now,
                                     elapsed: priorElapsed + elapsed)
        if case .retry(let wait, _) = decision { waited += wait }
        return decision
    }
}
