/// What one stage or observer keeps for one job, across the job's attempts (a retry's
/// renewed credential, the cache's stored answer, a download's resume point). Each member
/// of the pipeline declares its own type; the job holds one slot per member that has
/// changed its state (`Job.state(of:)`, `Job.withState(of:_:)`).
protocol JobState: Sendable {}

/// A state whose start is the same for every job (`init()`): its member need not say what a
/// job starts with.
protocol DefaultJobState: JobState {
    /// The state of a job the member has not touched yet.
    init()
}

/// The state of a member that keeps none.
struct NoState: DefaultJobState {}

/// A stage or an observer (`Pipeline` lists both): a reference made once for the daemon, or
/// once per job for a kind's own stage, whose per-job state lives in the job.
protocol PipelineMember: AnyObject, Sendable {
    associatedtype State: JobState = NoState
    /// The state a job starts with (`State()` for a `DefaultJobState`). Called under the
    /// job's lock: it must read only the job's and the member's constant parts (`spec`, `id`),
    /// never a locked member.
    func initialState(_ job: Job) -> State
}

extension PipelineMember where State: DefaultJobState {
    func initialState(_ job: Job) -> State { State() }
}

/// A job's slots: one per member that changed its state, found by the member's identity. A
/// short list (most jobs fill none or two), kept under the job's lock: a `Job` carries one
/// reference for all of them.
struct StateSlots {
    private var head: StateSlot?
    /// Slots made so far.
    private(set) var count = 0

    /// The member's state (a copy), or its initial state when it never changed it.
    func value<Member: PipelineMember>(of member: Member, in job: Job) -> Member.State {
        guard let slot = find(ObjectIdentifier(member)) else { return member.initialState(job) }
        return unsafeDowncast(slot, to: TypedStateSlot<Member.State>.self).value
    }

    /// Changes the member's state in place (its slot is made the first time).
    mutating func modify<Member: PipelineMember, R>(_ member: Member, in job: Job, _ body: (inout Member.State) -> R) -> R {
        let key = ObjectIdentifier(member)
        let slot: TypedStateSlot<Member.State>
        if let found = find(key) {
            slot = unsafeDowncast(found, to: TypedStateSlot<Member.State>.self)
        } else {
            slot = TypedStateSlot(owner: key, next: head, value: member.initialState(job))
            head = slot
            count += 1
        }
        return body(&slot.value)
    }

    /// Whether the member has made its slot (changed its state for this job).
    func has<Member: PipelineMember>(_ member: Member) -> Bool {
        find(ObjectIdentifier(member)) != nil
    }

    private func find(_ key: ObjectIdentifier) -> StateSlot? {
        var slot = head
        while let current = slot {
            if current.owner == key { return current }
            slot = current.next
        }
        return nil
    }
}

/// One member's slot. Touched only under its job's lock (`StateSlots`).
class StateSlot: @unchecked Sendable {
    let owner: ObjectIdentifier
    let next: StateSlot?

    init(owner: ObjectIdentifier, next: StateSlot?) {
        self.owner = owner
        self.next = next
    }
}

final class TypedStateSlot<State: JobState>: StateSlot, @unchecked Sendable {
    var value: State

    init(owner: ObjectIdentifier, next: StateSlot?, value: State) {
        self.value = value
        super.init(owner: owner, next: next)
    }
}
