import FetchEngine
import FoundationEssentials
import JSONRPC

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
    let clock: JobClock
    private let gate: HostGate

    init(admission: HostAdmission, shared: SharedAdmission?, log: Logger, metrics: Metrics, clock: JobClock) {
        self.admission = admission
        self.shared = shared
        gate = HostGate(admission: admission, shared: shared, clock: clock)
        self.log = log
        self.metrics = metrics
        self.clock = clock
    }

    func prepare(_ attempt: Attempt, _ job: Job) throws -> Preparation {
        let ticket = Self.ticket(attempt, job)
        if ticket.cost != 1 { try Self.check(cost: ticket.cost, admission.limit(for: ticket.host)) }
        // The answer's timings.queuedMs is the last attempt's wait: an earlier one's is not.
        if job.report.queuedMs != 0 { job.updateReport { $0.queuedMs = 0 } }
        if let shared, case let limit = admission.limit(for: ticket.host), limit.shared {
            return sharedHold(ticket, limit: limit, shared: shared, job: job)
        }
        if admission.startNow(ticket) { return .proceed }
        // Only a job's first attempt can be refused for a full queue.
        let accepted = attempt.number > 1
        let queued = clock.now()
        return .hold(Hold(
            start: { [admission, metrics, clock] release in
                do {
                    try admission.enqueue(ticket, alreadyAccepted: accepted, admitted: { result in
                        let waited = clock.now() - queued
                        job.updateReport { $0.queuedMs = Self.milliseconds(waited) }
                        metrics.count(.limitWaits)
                        metrics.count(.limitWaitMicroseconds, by: Int(waited * 1e6))
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
        let queued = clock.now()
        return .hold(Hold(
            start: { [clock] release in
                shared.enqueue(ticket, limit: limit, admitted: { result in
                    job.updateReport { $0.queuedMs = Self.milliseconds(clock.now() - queued) }
                    release(result)
                })
            },
            cancel: { error in shared.cancel(ticket, error: error) }))
    }

    /// Seconds as milliseconds to two places, rounded down.
    static func milliseconds(_ seconds: Double) -> Double {
        (max(0, seconds) * 100_000).rounded(.down) / 100
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

    static func ticket(_ attempt: Attempt, _ job: Job) -> HostScheduler.Ticket {
        // Most requests give no routing field, and so no cost.
        let cost = job.spec.model.hasRouting ? job.spec.model.routing.cost ?? 1 : 1
        return HostScheduler.Ticket(id: job.transferID, host: job.host(of: attempt), priority: job.spec.model.priority, cost: cost)
    }

    /// A request whose `cost` is more than its host's burst could never start: -32602.
    static func check(cost: Double, _ limit: HostScheduler.Limit) throws(RPCError) {
        guard let rps = limit.requestsPerSecond, rps > 0, cost > Double(limit.burst) else { return }
        let text = cost == cost.rounded() && cost < 1e15 ? String(Int(cost)) : String(cost)
        throw RPCError.invalidParams(field: "cost", "\(text) is more than the host's burst (\(limit.burst)): it could never start")
    }
}
