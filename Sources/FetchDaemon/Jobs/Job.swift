import FetchEngine
import Dispatch
import FoundationEssentials
import Glibc
import JSONRPC
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
    /// More members of the error's data (a stub miss's `nearest`).
    var data: JSONObject? = nil
}

/// One live request of `fetch`, `download` or `upload`, from registration to its answer: what
/// it is (`spec`), where it stands (`JobMachine`, under the job's lock), and what its stages
/// keep between attempts. `JobDriver` moves it; nothing here performs I/O.
final class Job: Sendable {
    struct Snapshot: Sendable {
        let jobID: String
        let kind: JobSpec.Kind
        let method: String
        let url: String
        let state: JobMachine.State
        let attempt: Int
        let progress: TransferProgress?
        let comment: String?
        let durable: Bool
    }

    let id: String
    let transferID: UInt64
    let connectionID: UInt64
    let spec: JobSpec
    /// The connection the job came from: notifications, and its answer, go there.
    let context: RPCContext
    /// That connection's memory budget (its answer is counted there).
    let bodyBudget: BodyBudget?
    /// The clocks of the job's stages and observers (`JobServices.clock`).
    let clock: JobClock
    /// When the job was registered, on `clock.now`.
    let startedAt: Double
    private let mutable: Locked<Mutable>

    private struct Mutable {
        var machine: JobMachine
        var progress: TransferProgress?
        /// Each attempt's request and outcome, kept while they are recorded (HTTP logs,
        /// `exchange`: `HTTPLog`'s observer).
        var records: [AttemptRecord] = []
        /// The attempt being prepared or held, and how many of its stages have prepared it.
        var pending: (attempt: Attempt, prepared: Int)?
        var hold: Hold?
        var reply: ReplyingRPCMethod.Reply?
        /// Other connections' `attach` requests, answered with the job's own answer.
        var attached: [Attachment] = []
        /// How many of them asked for progress notifications.
        var watching = 0
        /// Where a download's file landed (its answer says so).
        var landed: LandedFile?
        /// What each stage and observer keeps for the job (`PipelineMember.State`).
        var slots = StateSlots()
        /// What the retry policy has used so far.
        var retry = RetryState()
        /// What the stages told about the job (the answer's queue time, cache, stub).
        var report = JobReport()
    }

    /// One `attach` request: answered as the job's own request, notified if it asked.
    struct Attachment: Sendable {
        let context: RPCContext
        let progress: Bool
        let reply: ReplyingRPCMethod.Reply
    }

    /// Set (under the job's lock) by a cancel's transition: after handing an attempt to the
    /// engine, the driver tells the machine only when a cancel may have raced the hand-over.
    private let cancelSeen = Atomic<Bool>(false)
    /// Whether a member has made its slot (set under the job's lock, read without it).
    private let hasSlots = Atomic<Bool>(false)
    /// Whether a stage has told the report anything (likewise).
    private let reported = Atomic<Bool>(false)
    var mayHaveBeenCancelled: Bool { cancelSeen.load(ordering: .sequentiallyConsistent) }

    /// How many daemon restarts this durable job has been resumed after (0: never).
    let restarts: Int

    init(id: String, transferID: UInt64, connectionID: UInt64, spec: JobSpec, context: RPCContext,
         bodyBudget: BodyBudget? = nil, clock: JobClock = .system, reply: @escaping ReplyingRPCMethod.Reply) {
        self.id = id
        self.clock = clock
        startedAt = clock.now()
        restarts = spec.durableRecord?.restarts ?? 0
        self.transferID = transferID
        self.connectionID = connectionID
        self.spec = spec
        self.context = context
        self.bodyBudget = bodyBudget
        // Resumed: its attempts and retries go on from where they stood (a restart is not a
        // failed attempt), and maxElapsed counts from its first start.
        let resumed = spec.durableRecord.flatMap { $0.restarts > 0 ? $0 : nil }
        var retry = RetryState()
        if let resumed {
            retry = RetryState(jitter: resumed.retry.jitter, failures: resumed.retry.failures, waited: resumed.retry.waited,
                               priorElapsed: max(0, clock.wall().timeIntervalSince1970 - resumed.started))
        }
        mutable = Locked(Mutable(machine: JobMachine(attempts: resumed?.retry.attempts ?? 0), reply: reply, retry: retry))
    }

    /// Seconds since the job was registered.
    var elapsed: Double { clock.now() - startedAt }

    /// The job's retry budget: what its retry policy has counted across its attempts (and, for
    /// a durable job, across daemon restarts). The job's, not one stage's: the retry stage
    /// judges with it, a resumable upload's refused chunk uses it up, the durable journal
    /// writes it down.
    var retry: RetryState { mutable.withLock { $0.retry } }

    /// Changes the retry budget under the job's lock (`body` must not call the job).
    func withRetry<R>(_ body: (inout RetryState) -> R) -> R {
        mutable.withLock { body(&$0.retry) }
    }

    /// A durable job survives the daemon (Durable jobs); it is always detached.
    var detach: Bool { spec.model.detach || spec.durable }
    var durable: Bool { spec.durable }
    var comment: String? { spec.model.comment }

    /// Attempts handed to the engine so far.
    var attempts: Int { mutable.withLock { $0.machine.attempts } }

    var state: JobMachine.State { mutable.withLock { $0.machine.state } }

    /// The number of the attempt the next step belongs to (`JobMachine.nextAttempt`).
    var nextAttempt: Int { mutable.withLock { $0.machine.nextAttempt } }

    /// Moves the machine under the job's lock; the caller performs the actions after it. When
    /// they answer the job, the reply comes with them (taken once).
    func transition(_ event: JobMachine.Event, now: @autoclosure () -> Double)
        -> (actions: JobMachine.Actions, taken: Bool, reply: ReplyingRPCMethod.Reply?) {
        mutable.withLock { m in
            if case .cancel = event { cancelSeen.store(true, ordering: .sequentiallyConsistent) }
            let (actions, taken) = m.machine.handle(event, now: now())
            guard actions.answers else { return (actions, taken, nil) }
            defer { m.reply = nil }
            return (actions, taken, m.reply)
        }
    }

    // MARK: what the stages and observers keep (under the job's lock)

    /// The member's state for this job (a copy, taken under the job's lock; a job whose
    /// members never changed theirs answers without the lock).
    func state<Member: PipelineMember>(of member: Member) -> Member.State {
        guard hasSlots.load(ordering: .acquiring) else { return member.initialState(self) }
        return mutable.withLock { $0.slots.value(of: member, in: self) }
    }

    /// Whether the member ever changed its state for this job (without the lock while no
    /// member did).
    func hasState<Member: PipelineMember>(of member: Member) -> Bool {
        guard hasSlots.load(ordering: .acquiring) else { return false }
        return mutable.withLock { $0.slots.has(member) }
    }

    /// Changes the member's state for this job under the job's lock: `body` must not call
    /// anything that takes it again (the job's other members), nor wait.
    @discardableResult
    func withState<Member: PipelineMember, R>(of member: Member, _ body: (inout Member.State) -> R) -> R {
        mutable.withLock { m in
            let made = m.slots.count
            defer { if m.slots.count != made { hasSlots.store(true, ordering: .releasing) } }
            return m.slots.modify(member, in: self, body)
        }
    }

    /// What the stages told about the job so far (one atomic load while they told nothing).
    var report: JobReport {
        guard reported.load(ordering: .acquiring) else { return JobReport() }
        return mutable.withLock { $0.report }
    }

    /// A stage tells the report what it learnt (under the job's lock: `body` must not call the job).
    func updateReport(_ body: (inout JobReport) -> Void) {
        mutable.withLock { m in
            body(&m.report)
            reported.store(true, ordering: .releasing)
        }
    }

    // MARK: what the driver keeps between its steps (each taken once)

    func keepPending(_ attempt: Attempt, prepared: Int, hold: Hold? = nil) {
        mutable.withLock { m in
            m.pending = (attempt, prepared)
            m.hold = hold
        }
    }

    func takePending() -> (attempt: Attempt, prepared: Int)? {
        mutable.withLock { m in
            defer { m.pending = nil }
            return m.pending
        }
    }

    func takeHold() -> Hold? {
        mutable.withLock { m in
            defer { m.hold = nil }
            return m.hold
        }
    }

    /// Keeps the latest progress; returns the attached connections that want it.
    @discardableResult
    func record(_ progress: TransferProgress) -> [RPCContext] {
        mutable.withLock { m in
            m.progress = progress
            return m.watching == 0 ? [] : m.attached.filter(\.progress).map(\.context)
        }
    }

    /// The attached connections that asked for notifications.
    var watchers: [RPCContext] {
        mutable.withLock { m in m.watching == 0 ? [] : m.attached.filter(\.progress).map(\.context) }
    }

    /// Called by the registry while the job is live (under the registry's lock, so the job
    /// cannot leave in between): `takeAttached` after the job has left hands it out.
    func attach(_ attachment: Attachment) {
        mutable.withLock { m in
            m.attached.append(attachment)
            if attachment.progress { m.watching += 1 }
        }
    }

    func takeAttached() -> [Attachment] {
        mutable.withLock { m in
            defer { m.attached = []; m.watching = 0 }
            return m.attached
        }
    }

    func record(_ attempt: AttemptRecord) {
        mutable.withLock { $0.records.append(attempt) }
    }

    /// What HTTP logs say about the job itself.
    struct Info: Sendable {
        let id: String
        let comment: String?
        /// HAR's cache object of the job's last entry (what the HTTP cache did).
        var cache: JSONObject? = nil
    }

    var info: Info { Info(id: id, comment: comment, cache: report.harCache) }

    /// The download's file is at its final path (told by its answer, before the job ends).
    func noteLanded(_ file: LandedFile) {
        mutable.withLock { $0.landed = file }
    }

    var landed: LandedFile? { mutable.withLock { $0.landed } }

    /// One attempt as sent and as it ended, for HTTP logs.
    struct AttemptRecord: Sendable {
        let number: Int
        let startedAt: Date
        let request: HTTPRequest
        let outcome: Result<HTTPResponse, TransferError>
        /// What an auth rule added (`Attempt.ruleSecrets`).
        var ruleSecrets: [String] = []
    }

    var attemptRecords: [AttemptRecord] { mutable.withLock { $0.records } }

    var snapshot: Snapshot {
        mutable.withLock {
            Snapshot(jobID: id, kind: spec.kind, method: spec.request.method, url: spec.request.url,
                     state: $0.machine.state, attempt: $0.machine.attempts, progress: $0.progress, comment: comment,
                     durable: durable)
        }
    }
}
