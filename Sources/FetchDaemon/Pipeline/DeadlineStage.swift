import FetchEngine

/// The request's `maxTime`: one limit on the whole job, every attempt, host wait and retry
/// wait included (curl's `-m`). Each attempt's timeouts are cut to what is left of it; an
/// attempt that would start past it, or a failure at it, ends the job with kind `timeout`.
/// The retry stage asks `refusesWait` before it schedules a wait the deadline would cut.
final class DeadlineStage: Stage {
    func prepare(_ attempt: Attempt, _ job: Job) throws -> Preparation {
        guard let deadline = job.deadline else { return .proceed }
        let left = deadline - ContinuousClock.now
        let leftMs = Int(left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000)
        guard leftMs > 0 else { return .answer(.failure(Self.expired(job, attempts: attempt.number - 1))) }
        attempt.request.timeoutMs = min(attempt.request.timeoutMs, leftMs)
        attempt.request.connectTimeoutMs = min(attempt.request.connectTimeoutMs, leftMs)
        return .proceed
    }

    func judge(_ attempt: Attempt, _ outcome: AttemptOutcome, _ job: Job) -> Verdict {
        guard let deadline = job.deadline, case .failure(let failed as JobFailed) = outcome,
              failed.error.kind == .timeout, ContinuousClock.now >= deadline - .milliseconds(20) else { return .pass }
        return .fail(Self.expired(job, attempts: attempt.number))
    }

    /// Whether a retry wait of `delay` seconds would end past the deadline: the job then fails now.
    static func refusesWait(_ delay: Double, _ job: Job) -> Bool {
        guard let deadline = job.deadline else { return false }
        return ContinuousClock.now + .milliseconds(Int64(delay * 1000)) >= deadline
    }

    static func expired(_ job: Job, attempts: Int) -> JobFailed {
        let elapsed = ContinuousClock.now - job.startedAt
        let ms = elapsed.components.seconds * 1000 + elapsed.components.attoseconds / 1_000_000_000_000_000
        let limit = job.spec.model.maxTime ?? 0
        var error = TransferError(.timeout, "maxTime of \(limit) s reached after \(attempts) attempt\(attempts == 1 ? "" : "s") in \(ms / 1000).\(ms % 1000 / 100) s")
        error.curlCode = 28
        return JobFailed(jobID: job.id, attempts: attempts, error: error)
    }
}

extension Job {
    /// When the request's `maxTime` runs out (nil: no limit).
    var deadline: ContinuousClock.Instant? {
        spec.model.maxTime.map { startedAt + .milliseconds(Int64(($0 * 1000).rounded(.up))) }
    }
}
