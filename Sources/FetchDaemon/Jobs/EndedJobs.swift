import JSONRPC

/// How one job ended, as `getJob` and `attach` report it once it is gone from the live jobs.
struct EndedJob: Sendable {
    let jobID: String
    /// "finished" | "failed" | "cancelled".
    let state: String
    let durable: Bool
    let restarts: Int
    /// As stored: a fetch's result still holds its body when `omitsBody` (a small one: the
    /// answer's own members, shared rather than copied).
    private let stored: Result<JSONValue, RPCError>
    private let omitsBody: Bool
    /// What the answer is redacted with for the clients that ask (getJob and attach come from
    /// any connection).
    private let seen: JobSeenByOthers

    /// `answer`: the job's result, or its error as the client got it. A fetch's result is
    /// kept without its body (`EndedJobs.keeping`).
    init(jobID: String, state: String, durable: Bool, restarts: Int, answer: Result<JSONValue, RPCError>,
         isFetch: Bool = false, seen: JobSeenByOthers = JobSeenByOthers()) {
        self.jobID = jobID
        self.state = state
        self.durable = durable
        self.restarts = restarts
        self.seen = seen
        if isFetch, case .success(let result) = answer {
            let (value, omits) = EndedJobs.keeping(result)
            stored = .success(value)
            omitsBody = omits
        } else {
            stored = answer
            omitsBody = false
        }
    }

    /// The job's answer: its result (a fetch's without its body), or its error as the client got it.
    var answer: Result<JSONValue, RPCError> {
        omitsBody ? stored.map(EndedJobs.kept) : stored
    }

    /// The answer as getJob and attach show it: redacted (`JobSeenByOthers`).
    var answerSeenByOthers: Result<JSONValue, RPCError> {
        seen.answer(answer)
    }
}

/// The last `capacity` ended jobs by id, oldest dropped first: a ring, so memory stays bounded
/// whatever the traffic. A jobId used again replaces the older entry. Pure; the registry
/// keeps it under its lock.
struct EndedJobs: Sendable {
    static let defaultCapacity = 1_000

    let capacity: Int
    private var byID: [String: (sequence: UInt64, job: EndedJob)] = [:]
    /// Slots in the order they were written; `next` is the oldest once the ring is full.
    private var ring: [(sequence: UInt64, jobID: String)] = []
    private var next = 0
    private var sequence: UInt64 = 0

    init(capacity: Int = defaultCapacity) {
        self.capacity = max(1, capacity)
    }

    var count: Int { byID.count }

    subscript(jobID: String) -> EndedJob? { byID[jobID]?.job }

    /// Returns what it dropped (the oldest, once the ring is full; or an earlier end of the
    /// same id), for the caller to free outside its lock.
    @discardableResult
    mutating func add(_ job: EndedJob) -> EndedJob? {
        sequence += 1
        let slot = (sequence: sequence, jobID: job.jobID)
        var dropped: EndedJob?
        if ring.count < capacity {
            ring.append(slot)
        } else {
            let oldest = ring[next]
            // Only when that id was not ended again since (a newer entry is not dropped). One
            // lookup, not two (each hashes the id).
            if let index = byID.index(forKey: oldest.jobID), byID[index].value.sequence == oldest.sequence {
                dropped = byID.remove(at: index).value.job
            }
            ring[next] = slot
            next = (next + 1) % capacity
        }
        if let replaced = byID.updateValue((sequence, job), forKey: job.jobID) { dropped = replaced.job }
        return dropped
    }

    /// What the ring stores of a fetch's result, and whether its body is still to be left
    /// out when it is read. A body of up to `sharedBodyBytes` stays in the stored value: the
    /// result is then the answer's own object, shared, where leaving the body out at once
    /// copied every member (about 4k instructions per small GET; `getJob` and `attach`,
    /// which read it, are rare). The ring then holds no body field over 4 KiB, for at most
    /// 1,000 jobs.
    static func keeping(_ result: JSONValue) -> (JSONValue, omitsBody: Bool) {
        guard case .object(let object) = result else { return (result, false) }
        var small = true
        object.members.withUnsafeBufferPointer { members in
            for member in members where isBodyField(member.key) {
                // A string's length is known; any other value (a json tree) counts as large.
                guard case .string(let text) = member.value, text.utf8.count <= sharedBodyBytes else {
                    small = false
                    return
                }
            }
        }
        return small ? (result, true) : (kept(result), false)
    }

    static let sharedBodyBytes = 4 << 10

    /// What a fetch's result keeps once ended: no body (the ring would otherwise hold up to
    /// 1,000 bodies of up to 64 MiB); `bodyOmitted` says it was there.
    static func kept(_ result: JSONValue) -> JSONValue {
        guard case .object(let object) = result else { return result }
        var (kept, omitted) = object.removingMembers(where: isBodyField, keepingRoomFor: 1)
        guard omitted else { return result }
        kept.append(distinctKey: "bodyOmitted", true)
        return .object(kept)
    }

    /// "body", "bodyBase64", "json" or "jsonError". Asked of every member of every fetch's
    /// answer: the length decides first, so most keys are never compared.
    static func isBodyField(_ key: String) -> Bool {
        switch key.utf8.count {
        case 4: key == "body" || key == "json"
        case 9: key == "jsonError"
        case 10: key == "bodyBase64"
        default: false
        }
    }
}
