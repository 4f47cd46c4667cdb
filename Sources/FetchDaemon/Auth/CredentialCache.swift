/// One rule's credential over time, pure (the clock is an argument): the one held, and the
/// single flight that fetches the next: while a fetch runs every request that needs the
/// credential waits for it, and they all get its result. `Waiter` is what a waiting request
/// is resumed with.
struct CredentialCache<Waiter> {
    private(set) var held: Credential?
    /// Counts the credentials fetched; a 401 drops the held credential only when it is the
    /// one the request carried, not a newer one another request fetched meanwhile.
    private(set) var generation = 0
    private(set) var fetching = false
    private(set) var lastError: String?
    private var waiters: [(id: UInt64, waiter: Waiter)] = []

    var waiting: Int { waiters.count }

    enum Lookup {
        /// Use this credential now (the waiter is not kept).
        case ready(Credential, generation: Int)
        /// The waiter is kept until a fetch ends; `startFetch`: none runs, the caller starts it.
        case wait(startFetch: Bool)
    }

    /// The held credential, if it may still be used at `now`.
    func usable(now: Double) -> (Credential, generation: Int)? {
        guard let held, held.usableUntil.map({ now < $0 }) ?? true else { return nil }
        return (held, generation)
    }

    /// The credential now, or `waiter` kept until the fetch (started by the first waiter) ends.
    mutating func lookup(now: Double, id: UInt64, waiter: Waiter) -> Lookup {
        if let (credential, generation) = usable(now: now) { return .ready(credential, generation: generation) }
        held = nil
        waiters.append((id, waiter))
        guard !fetching else { return .wait(startFetch: false) }
        fetching = true
        return .wait(startFetch: true)
    }

    /// The fetch ended: every waiter gets its result (the caller resumes them, outside any lock).
    mutating func fetched(_ result: Result<Credential, AuthProblem>) -> (waiters: [Waiter], generation: Int) {
        fetching = false
        switch result {
        case .success(let credential):
            generation += 1
            lastError = nil
            held = credential.kept ? credential : nil
        case .failure(let problem):
            lastError = problem.reason
            held = nil
        }
        defer { waiters = [] }
        return (waiters.map(\.waiter), generation)
    }

    /// A 401 to a request that carried generation `generation`: that credential is dropped.
    @discardableResult
    mutating func drop(generation dropped: Int) -> Bool {
        guard held != nil, generation == dropped else { return false }
        held = nil
        return true
    }

    /// A waiter gave up (its job was cancelled): it is not resumed.
    mutating func cancel(id: UInt64) -> Waiter? {
        guard let index = waiters.firstIndex(where: { $0.id == id }) else { return nil }
        return waiters.remove(at: index).waiter
    }
}
