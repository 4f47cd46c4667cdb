import FetchEngine
import Dispatch
import FoundationEssentials
import Glibc
import Synchronization

/// Who stopped a job (the `by` of a -32002 error).
enum CancelReason: String, Sendable {
    case cancel, disconnect, shutdown
}

/// A job stopped before it finished.
struct JobCancelled: Error {
    let jobID: String
    let by: CancelReason
}

/// A job's transfer failed after all its attempts.
struct JobFailed: Error {
    let jobID: String
    let attempts: Int
    let error: TransferError
}

/// One live request of `fetch`, `download` or `upload`, from registration to its answer.
/// Its lock orders a transfer's start against a cancel, so a cancel is never lost between
/// "not started yet" and "running".
final class Job: Sendable {
    enum State: String, Sendable {
        case queued, running, waiting
    }

    struct Snapshot: Sendable {
        let jobID: String
        let method: String
        let url: String
        let state: State
        let attempt: Int
        let progress: TransferProgress?
        let comment: String?
    }

    let id: String
    let transferID: UInt64
    let connectionID: UInt64
    let detach: Bool
    let method: String
    let url: String
    let comment: String?
    private let mutable = Locked(Mutable())

    private struct Mutable {
        var state = State.queued
        var attempt = 0
        var cancelledBy: CancelReason?
        var finished = false
        var progress: TransferProgress?
        /// Set while waiting to retry; resumed by the timer or by a cancel, whichever is first.
        var waiter: CheckedContinuation<Void, any Error>?
        /// Set while queued behind the host's limits.
        var waitingTicket: HostScheduler.Ticket?
        /// Each attempt's request and outcome, kept while HTTP logging is on.
        var records: [AttemptRecord] = []
    }

    /// The budget of the connection the job came from (its answer goes there).
    let bodyBudget: BodyBudget?

    init(id: String, transferID: UInt64, connectionID: UInt64, detach: Bool, method: String, url: String, comment: String?,
         bodyBudget: BodyBudget? = nil) {
        self.bodyBudget = bodyBudget
        self.id = id
        self.transferID = transferID
        self.connectionID = connectionID
        self.detach = detach
        self.method = method
        self.url = url
        self.comment = comment
    }

    var attempts: Int { mutable.withLock { $0.attempt } }

    /// What HTTP logs say about the job itself.
    struct Info: Sendable {
        let id: String
        let comment: String?
    }

    var info: Info { Info(id: id, comment: comment) }

    /// One attempt as sent and as it ended, for HTTP logs.
    struct AttemptRecord: Sendable {
        let number: Int
        let startedAt: Date
        let request: HTTPRequest
        let outcome: Result<HTTPResponse, TransferError>
    }

    var attemptRecords: [AttemptRecord] { mutable.withLock { $0.records } }

    var snapshot: Snapshot {
        mutable.withLock {
            Snapshot(jobID: id, method: method, url: url, state: $0.state, attempt: $0.attempt,
                     progress: $0.progress, comment: comment)
        }
    }

    /// Runs one attempt: waits for its host's turn (limits shared by every client), then
    /// performs it on the engine, unless the job was cancelled first.
    func attempt(
        _ request: HTTPRequest, host: HostKey, priority: Int, on services: JobServices,
        onProgress: (@Sendable (TransferProgress) -> Void)?
    ) async throws -> HTTPResponse {
        try await waitForHost(ticket(host: host, priority: priority), services: services)
        return try await withUnsafeThrowingContinuation { continuation in
            launch(request, host: host, on: services, onProgress: onProgress) { continuation.resume(with: $0) }
        }
    }

    /// Starts an attempt at once when its host has room: `completion` then gets its outcome
    /// (on the engine thread, or here when it cannot start). False, and nothing started, when
    /// the attempt has to queue behind the host's limits: `attempt` does that.
    func attemptNow(
        _ request: HTTPRequest, host: HostKey, priority: Int, on services: JobServices,
        onProgress: (@Sendable (TransferProgress) -> Void)?,
        completion: @escaping @Sendable (Result<HTTPResponse, any Error>) -> Void
    ) throws -> Bool {
        guard try startIfHostFree(ticket(host: host, priority: priority), services: services) else { return false }
        launch(request, host: host, on: services, onProgress: onProgress, completion: completion)
        return true
    }

    private func ticket(host: HostKey, priority: Int) -> HostScheduler.Ticket {
        HostScheduler.Ticket(id: transferID, host: host, priority: priority)
    }

    /// Hands an admitted attempt to the engine. From here it holds one of the host's slots
    /// until it ends. The outcome is recorded for HTTP logs; a cancel that was acknowledged
    /// wins over a result that raced it.
    private func launch(
        _ request: HTTPRequest, host: HostKey, on services: JobServices,
        onProgress: (@Sendable (TransferProgress) -> Void)?,
        completion: @escaping @Sendable (Result<HTTPResponse, any Error>) -> Void
    ) {
        var request = request
        request.recordsExchange = services.httpLog.isEnabled
        // Bodies kept in memory count against what the client's connection may hold.
        if case .memory = request.destination { request.bodyBudget = bodyBudget }
        let observe: @Sendable (TransferProgress) -> Void = { [self] progress in
            mutable.withLock { $0.progress = progress }
            onProgress?(progress)
        }
        let startedAt = Date()
        let recorded = request
        let ended: @Sendable (Result<HTTPResponse, TransferError>) -> Void = { [self] outcome in
            services.admission.finished(host)
            let (cancelledBy, attempts) = mutable.withLock { m -> (CancelReason?, Int) in
                if recorded.recordsExchange {
                    m.records.append(AttemptRecord(number: m.attempt, startedAt: startedAt, request: recorded, outcome: outcome))
                }
                return (m.cancelledBy, m.attempt)
            }
            if let by = cancelledBy { return completion(.failure(JobCancelled(jobID: id, by: by))) }
            completion(outcome.mapError { JobFailed(jobID: id, attempts: attempts, error: $0) })
        }
        let refusal = mutable.withLock { m -> (any Error)? in
            if let by = m.cancelledBy { return JobCancelled(jobID: id, by: by) }
            do {
                try services.engine.start(request, id: transferID, onProgress: observe, completion: ended)
            } catch {
                return error
            }
            m.state = .running
            m.attempt += 1
            return nil
        }
        if let refusal {
            services.admission.finished(host)
            completion(.failure(refusal))
        }
    }

    /// Takes one of the host's slots now if its limits allow it without waiting.
    private func startIfHostFree(_ ticket: HostScheduler.Ticket, services: JobServices) throws -> Bool {
        try mutable.withLock { m throws -> Bool in
            if let by = m.cancelledBy { throw JobCancelled(jobID: id, by: by) }
            return services.admission.startNow(ticket)
        }
    }

    /// Queues behind the host's limits; a cancel takes the job out of the queue.
    private func waitForHost(_ ticket: HostScheduler.Ticket, services: JobServices) async throws {
        // Most requests find their host free: start without suspending.
        if try startIfHostFree(ticket, services: services) { return }
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let refusal = mutable.withLock { m -> (any Error)? in
                if let by = m.cancelledBy { return JobCancelled(jobID: id, by: by) }
                do {
                    // Only a job's first attempt can be refused for a full queue.
                    try services.admission.enqueue(ticket, alreadyAccepted: m.attempt > 0) { continuation.resume(with: $0) }
                } catch {
                    return error
                }
                m.state = .queued
                m.waitingTicket = ticket
                return nil
            }
            if let refusal { continuation.resume(throwing: refusal) }
        }
        mutable.withLock { $0.waitingTicket = nil }
    }

    /// Timers for the waits between attempts. A serial queue: `DispatchQueue.global()` would
    /// start libdispatch's workqueue, whose monitor then wakes the process every second.
    private static let retryTimers = DispatchQueue(label: "fetchd.retry-waits")

    /// Waits before the next attempt; a cancel ends the wait at once.
    func waitBeforeRetry(seconds: Double) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let cancelledBy = mutable.withLock { m -> CancelReason? in
                if let by = m.cancelledBy { return by }
                m.state = .waiting
                m.waiter = continuation
                return nil
            }
            if let by = cancelledBy {
                continuation.resume(throwing: JobCancelled(jobID: id, by: by))
                return
            }
            Self.retryTimers.asyncAfter(deadline: .now() + seconds) { [self] in
                let waiter = mutable.withLock { m -> CheckedContinuation<Void, any Error>? in
                    defer { m.waiter = nil }
                    if m.waiter != nil { m.state = .queued }
                    return m.waiter
                }
                waiter?.resume()
            }
        }
    }

    /// Marks the job cancelled and stops its transfer or its wait. False when it had
    /// already finished or been cancelled.
    func cancel(by reason: CancelReason, services: JobServices) -> Bool {
        let (cancelled, waiter) = mutable.withLock { m -> (Bool, CheckedContinuation<Void, any Error>?) in
            guard !m.finished, m.cancelledBy == nil else { return (false, nil) }
            m.cancelledBy = reason
            if let ticket = m.waitingTicket {
                services.admission.cancel(ticket, error: JobCancelled(jobID: id, by: reason))
            }
            if m.state == .running { services.engine.cancel(transferID) }
            defer { m.waiter = nil }
            return (true, m.waiter)
        }
        waiter?.resume(throwing: JobCancelled(jobID: id, by: reason))
        return cancelled
    }

    /// The job's outcome is decided: from now on a cancel answers false. Returns who
    /// cancelled it first, if anyone did: then the outcome is that cancel.
    func settle() -> CancelReason? {
        mutable.withLock { m in
            if let by = m.cancelledBy { return by }
            m.finished = true
            return nil
        }
    }

    /// After this, cancels answer false.
    func markFinished() {
        mutable.withLock { $0.finished = true }
    }
}

/// What jobs run on: the engine, and the admission queue that applies every host's limits.
struct JobServices: Sendable {
    let engine: HTTPEngine
    let admission: HostAdmission
    let httpLog: HTTPLog
    let log: Logger
    /// Builds answers beside the engine thread when it is busy.
    let answers: WorkerThreads
    /// Where jobs that wait (retries, queues, large answers) continue as tasks.
    let tasks: WorkerThreads
}
