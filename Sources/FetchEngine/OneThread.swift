import Glibc
import Synchronization

/// The rule "one thread only", checked in debug builds, for state that one thread owns but
/// that may be made on another (an engine thread's, made in the engine's or a transfer's
/// init) and that unit tests drive from their own thread: the first thread that checks
/// becomes the owner, and any other fails the check. `assert(thread.isOwner)`: nothing runs
/// in release builds.
public struct OneThread: ~Copyable {
    private let owner = Atomic<UInt>(0)

    public init() {}

    public var isOwner: Bool {
        let me = pthread_self()
        let (claimed, original) = owner.compareExchange(expected: 0, desired: me, ordering: .relaxed)
        return claimed || original == me
    }
}
