import FetchEngine
import Synchronization

/// A hold's release, called once: by what the attempt waits for, or by a cancel, whichever
/// comes first. What the winner changes on the attempt and the job is applied under the lock
/// (`release(_:apply:)`, `ifPending`), so a cancel that comes meanwhile waits for it.
final class PendingRelease: Sendable {
    private let pending = Locked<(@Sendable (Result<Void, any Error>) -> Void)?>(nil)
    private let released = Atomic<Bool>(false)

    func arm(_ release: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        pending.withLock { $0 = release }
    }

    /// Released already (a cancel came): what the attempt waited for can stop.
    var isReleased: Bool { released.load(ordering: .relaxed) }

    /// Runs `body` under the lock if the release is still pending (a cancel then waits for it);
    /// false, without running it, when it was released.
    func ifPending(_ body: () -> Void) -> Bool {
        pending.withLock { p in
            guard p != nil else { return false }
            body()
            return true
        }
    }

    /// Releases the attempt with `result` if nothing did before, after `apply` has run under
    /// the lock; false when it was released already (`apply` does not run).
    @discardableResult
    func release(_ result: Result<Void, any Error>, apply: () -> Void = {}) -> Bool {
        let taken = pending.withLock { p -> (@Sendable (Result<Void, any Error>) -> Void)? in
            guard let release = p else { return nil }
            p = nil
            apply()
            return release
        }
        guard let taken else { return false }
        released.store(true, ordering: .relaxed)
        taken(result)
        return true
    }
}
