import FetchEngine
import FoundationEssentials

/// Every host's limits, shared by every client: an attempt starts at once when its host has
/// room, else it is held in the host's queue (by priority, then first come) until the limits
/// allow it. Each attempt gives its slot back when it ends; a 429 or 503 with Retry-After
/// pauses the host for everyone, whether or not this job tries again.
final class HostLimitStage: Stage {
    let admission: HostAdmission
    /// Hosts whose limit is `shared` are admitted here, through Redis (`--redis`).
    let shared: SharedAdmission?
    let log: Logger
    let metrics: Metrics
    private let gate: HostGate

    init(admission: HostAdmission, shared: SharedAdmission?, log: Logger, metrics: Metrics) {
        self.admission = admission
        self.shared = shared
        gate = HostGate(admission: admission, shared: shared)
        self.log = log
        self.metrics = metrics
    }

    func prepare(_ attempt: Attempt, _ job: Job) throws -> Preparation {
        let ticket = Self.ticket(attempt, job)
        job.pipeline.queuedMs = 0
        if let shared, case let limit = admission.limit(for: ticket.host), limit.shared {
            return sharedHold(ticket, limit: limit, shared: shared, job: job)
        }
        if admission.startNow(ticket) { return .proceed }
        // Only a job's first attempt can be refused for a full queue.
        let accepted = attempt.number > 1
        let queued = ContinuousClock.now
        return .hold(Hold(
            start: { [admission, metrics] release in
                do {
                    try admission.enqueue(ticket, alreadyAccepted: accepted, admitted: { result in
                        let waited = (ContinuousClock.now - queued).components
                        job.pipeline.queuedMs = Double(waited.seconds) * 1000 + Double(waited.attoseconds / 10_000_000_000_000) / 100
                        metrics.count(.limitWaits)
                        metrics.count(.limitWaitMicroseconds, by: Int(waited.seconds) * 1_000_000 + Int(waited.attoseconds / 1_000_000_000_000))
                        release(result)
                    })
                } catch {
                    release(.failure(error))
                }
            },
            cancel: { [admission] error in admission.cancel(ticket, error: error) }))
    }

    /// A shared host's request always waits for its round trip to Redis (on the link's
    /// thread, not this one).
    private func sharedHold(_ ticket: HostScheduler.Ticket, limit: HostScheduler.Limit, shared: SharedAdmission,
                            job: Job) -> Preparation {
        let queued = ContinuousClock.now
        return .hold(Hold(
            start: { release in
                shared.enqueue(ticket, limit: limit, admitted: { result in
                    job.pipeline.queuedMs = Self.milliseconds(since: queued)
                    release(result)
                })
            },
            cancel: { error in shared.cancel(ticket, error: error) }))
    }

    static func milliseconds(since start: ContinuousClock.Instant) -> Double {
        let waited = (ContinuousClock.now - start).components
        return Double(waited.seconds) * 1000 + Double(waited.attoseconds / 10_000_000_000_000) / 100
    }

    func ended(_ attempt: Attempt, _ outcome: AttemptOutcome, _ job: Job) {
        let ticket = Self.ticket(attempt, job)
        let host = ticket.host
        let sharedHost = gate.finished(ticket)
        // The status first: only a 429 or 503 binds the response (a copy of a dozen references).
        guard let status = outcome.successStatus, RetryPolicy.retryAfterStatuses.contains(status),
              case .success(let answer) = outcome,
              let pause = gate.pauseForRetryAfter(
                answer.status, answer.headers, host: host, sharedHost: sharedHost,
                maxSeconds: job.spec.retryPolicy.maxInterval) else { return }
        metrics.count(.retryAfterPauses)
        log.info("pausing \(host) for \(pause) s: status \(answer.status) with Retry-After")
    }

    /// The attempt's own URL decides its host (a resumable upload's session URL may name
    /// another host: its limits apply).
    static func host(_ attempt: Attempt, _ job: Job) -> HostKey {
        // Most attempts go to the request's own URL, parsed once already.
        if attempt.request.url == job.spec.request.url { return job.spec.host }
        return (try? RequestURL(attempt.request.url)).map(HostKey.init) ?? job.spec.host
    }

    static func ticket(_ attempt: Attempt, _ job: Job) -> HostScheduler.Ticket {
        HostScheduler.Ticket(id: job.transferID, host: host(attempt, job), priority: job.spec.model.priority)
    }
}
