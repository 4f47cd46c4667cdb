import FetchEngine

/// The request's `maxTime`: one limit on the whole job, every attempt, host wait and retry
/// wait included (curl's `-m`). Each attempt's timeouts are cut to what is left of it; an
/// attempt that would start past it, a failure at it, or a retry whose wait would end past
/// it (`review`) ends the job with kind `timeout`.
final class DeadlineStage: Stage {
    let clock: JobClock

    init(clock: JobClock = .system) {
        self.clock = clock
    }

    func prepare(_ attempt: Attempt, _ job: Job) throws -> Preparation {
        guard let deadline = job.deadline else { return .proceed }
        let leftMs = Int(((deadline - clock.now()) * 1000).rounded(.down))
        guard leftMs > 0 else { return .answer(.failure(expired(job, attempts: attempt.number - 1))) }
        attempt.request.timeoutMs = min(attempt.request.timeoutMs, leftMs)
        attempt.request.connectTimeoutMs = min(attempt.request.connectTimeoutMs, leftMs)
        return .proceed
    }

    func judge(_ attempt: Attempt, _ outcome: AttemptOutcome, _ job: Job) -> Verdict {
        guard let deadline = job.deadline, case .failure(let failed as JobFailed) = outcome,
              failed.error.kind == .timeout, clock.now() >= deadline - 0.020 else { return .pass }
        return .fail(expired(job, attempts: attempt.number))
    }

    /// A retry whose wait would end past the deadline: the job fails now.
    func review(_ attempt: Attempt, _ decision: inout JobMachine.Decision, _ outcome: inout AttemptOutcome, _ job: Job) {
        guard case .again(let delay, _) = decision, let deadline = job.deadline,
              clock.now() + (delay * 1000).rounded(.towardZero) / 1000 >= deadline else { return }
        decision = .final
        outcome = .failure(expired(job, attempts: attempt.number))
    }

    func expired(_ job: Job, attempts: Int) -> JobFailed {
        let ms = Int((job.elapsed * 1000).rounded(.down))
        let limit = job.spec.model.maxTime ?? 0
        var error = TransferError(.timeout, "maxTime of \(limit) s reached after \(attempts) attempt\(attempts == 1 ? "" : "s") in \(ms / 1000).\(ms % 1000 / 100) s")
        error.curlCode = 28
        return JobFailed(jobID: job.id, attempts: attempts, error: error)
    }
}

extension Job {
    /// When the request's `maxTime` runs out, on `clock.now` (nil: no limit).
    var deadline: Double? {
        spec.model.maxTime.map { startedAt + ($0 * 1000).rounded(.up) / 1000 }
    }
}
