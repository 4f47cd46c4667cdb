import CLinux
import FetchEngine
import JSONRPC
import Synchronization

/// Every live job by id, and the counters `getStatus` reports.
final class JobRegistry: Sendable {
    struct Counts: Sendable {
        var queued = 0, running = 0, waiting = 0, finished = 0, failed = 0
    }

    let services: JobServices
    /// Taken by both small-request threads for every job (register, finish): only the
    /// dictionary and ring updates happen under it; the job, its id and what drops out of the
    /// ring are made and freed outside.
    private let state = Locked(State())
    /// Engine transfer ids, from 1.
    private let nextNumber = Atomic<UInt64>(1)
    /// The ids of jobs whose client named none.
    private let ids = JobIDs()
    /// What each open connection may hold in memory (Connection.bodyBudget).
    private let budgets = Locked<[UInt64: BodyBudget]>([:])

    private struct State {
        var live: [String: Job] = [:]
        var finished = 0
        var failed = 0
        /// Connections whose peer is gone: their new non-detached jobs are cancelled at once.
        var vanishedConnections: Set<UInt64> = []
        var shuttingDown = false
        /// The last 1,000 ended jobs (getJob, attach).
        var ended = EndedJobs()
    }

    private let memory: IdleMemoryRelease

    init(services: JobServices) {
        self.services = services
        let state = self.state
        memory = IdleMemoryRelease { state.withLock { $0.live.isEmpty } }
    }

    /// Registers a job under the client's id, or a fresh one.
    func register(_ spec: JobSpec, context: RPCContext, reply: @escaping ReplyingRPCMethod.Reply) throws -> Job {
        let jobID = spec.model.jobID, detach = spec.model.detach || spec.durable, connectionID = context.connectionID
        let budget = budgets.withLock { $0[connectionID] }
        let number = nextNumber.wrappingAdd(1, ordering: .relaxed).oldValue
        var id = jobID ?? ids.next()
        while true {
            let job = Job(id: id, transferID: number, connectionID: connectionID, spec: spec, context: context,
                          bodyBudget: budget, clock: services.clock, reply: reply)
            let registered = try state.withLock { s throws -> Bool in
                if s.shuttingDown { throw JobCancelled(jobID: jobID ?? "", by: .shutdown) }
                if s.live[id] != nil {
                    if let jobID { throw DuplicateJobID(jobID: jobID) }
                    return false
                }
                if !detach && s.vanishedConnections.contains(connectionID) {
                    throw JobCancelled(jobID: id, by: .disconnect)
                }
                s.live[id] = job
                return true
            }
            if registered { return job }
            // A live job has the generated id (a client named its job so): another one.
            id = ids.next()
        }
    }

    /// A fresh job id (`JobIDs`), for a job whose id is needed before it is registered (a
    /// durable job's record).
    func freshJobID() -> String {
        ids.next()
    }

    /// A job registered but never begun leaves without a trace (its durable record could not be written).
    func withdraw(_ job: Job) {
        state.withLock { s in
            if s.live[job.id] === job { s.live[job.id] = nil }
        }
    }

    /// An engine transfer id for work outside any job (a resumable upload's cancel command).
    func freshTransferID() -> UInt64 {
        nextNumber.wrappingAdd(1, ordering: .relaxed).oldValue
    }

    /// The job has ended: it leaves the live jobs for the ring of ended ones.
    func finish(_ job: Job, answer: Result<JSONValue, any Error>) {
        let kept: Result<JSONValue, RPCError>
        switch answer {
        case .success(let result): kept = .success(result)
        case .failure(let error): kept = .failure(ErrorMapping.rpcError(for: error))
        }
        let ended = EndedJob(jobID: job.id, state: job.state.name, durable: job.durable, restarts: job.restarts, answer: kept,
                             isFetch: job.spec.kind == .fetch, seen: JobSeenByOthers(job.spec.request))
        let (drained, dropped) = state.withLock { s -> (Bool, EndedJob?) in
            s.live[job.id] = nil
            if case .success = answer { s.finished += 1 } else { s.failed += 1 }
            return (s.live.isEmpty, s.ended.add(ended))
        }
        // The oldest ended job's answer is freed here, not under the lock.
        _ = dropped
        if drained { memory.jobsDrained() }
    }

    func cancel(jobID: String, by reason: CancelReason) -> Bool {
        guard let job = state.withLock({ $0.live[jobID] }) else { return false }
        return JobDriver(jobs: self).cancel(job, by: reason)
    }

    /// The connection's peer is gone: its jobs stop unless they were sent with `detach`.
    func connectionVanished(_ connectionID: UInt64) {
        let jobs = state.withLock { s -> [Job] in
            s.vanishedConnections.insert(connectionID)
            return s.live.values.filter { $0.connectionID == connectionID && !$0.detach }
        }
        for job in jobs { _ = JobDriver(jobs: self).cancel(job, by: .disconnect) }
    }

    func connectionOpened(_ connectionID: UInt64, budget: BodyBudget) {
        budgets.withLock { $0[connectionID] = budget }
    }

    /// The memory budget of an open connection (what waits for it to read).
    func budget(of connectionID: UInt64) -> BodyBudget? {
        budgets.withLock { $0[connectionID] }
    }

    func connectionClosed(_ connectionID: UInt64) {
        state.withLock { _ = $0.vanishedConnections.remove(connectionID) }
        budgets.withLock { $0[connectionID] = nil }
    }

    /// Refuses new jobs from now on.
    func beginShutdown() {
        state.withLock { $0.shuttingDown = true }
    }

    func cancelAll(by reason: CancelReason) {
        for job in state.withLock({ Array($0.live.values) }) { _ = JobDriver(jobs: self).cancel(job, by: reason) }
    }

    /// A live job, or how an ended one ended (nil: neither).
    func lookup(_ jobID: String) -> JobLookup? {
        state.withLock { s in
            if let job = s.live[jobID] { return .live(job) }
            return s.ended[jobID].map(JobLookup.ended)
        }
    }

    /// `attach`: a live job answers `reply` with its own answer, redacted
    /// (`JobSeenByOthers`), when it ends (`.live`); for an ended one, nothing is attached
    /// (`.ended`: answer with its `answerSeenByOthers`); nil: unknown id.
    func attach(_ jobID: String, context: RPCContext, progress: Bool, reply: @escaping ReplyingRPCMethod.Reply) -> JobLookup? {
        state.withLock { s in
            if let job = s.live[jobID] {
                let seen = JobSeenByOthers(job.spec.request)
                job.attach(Job.Attachment(context: context, progress: progress, reply: { reply(seen.answer($0)) }))
                return .live(job)
            }
            return s.ended[jobID].map(JobLookup.ended)
        }
    }

    var liveCount: Int { state.withLock { $0.live.count } }

    var snapshots: [Job.Snapshot] {
        state.withLock { Array($0.live.values) }.map(\.snapshot).sorted { $0.jobID < $1.jobID }
    }

    /// The live jobs, each with what other clients may see of it (listJobs).
    var snapshotsSeenByOthers: [(job: Job.Snapshot, seen: JobSeenByOthers)] {
        state.withLock { Array($0.live.values) }.map { ($0.snapshot, JobSeenByOthers($0.spec.request)) }.sorted { $0.job.jobID < $1.job.jobID }
    }

    var counts: Counts {
        let (jobs, finished, failed) = state.withLock { (Array($0.live.values), $0.finished, $0.failed) }
        var counts = Counts(finished: finished, failed: failed)
        for job in jobs {
            switch job.state.contractName {
            case "queued": counts.queued += 1
            case "waiting": counts.waiting += 1
            default: counts.running += 1
            }
        }
        return counts
    }
}

enum JobLookup {
    case live(Job)
    case ended(EndedJob)
}

/// A `jobId` that a live job already has (-32602, field `jobId`).
struct DuplicateJobID: Error {
    let jobID: String
}
