import Dispatch
internal import CLinux
import Synchronization

/// Gives freed memory back to the system once the daemon has had no job for a while.
/// glibc keeps the heap a burst of requests grew (tens of MB after thousands of requests);
/// without this an idle daemon would stay at its peak.
final class IdleMemoryRelease: Sendable {
    static let quietSeconds = 2.0

    private let queue = DispatchQueue(label: "fetchd.idle-memory")
    private let checkPending = Atomic<Bool>(false)
    /// Uptime in nanoseconds when the last job ended.
    private let lastIdleAt = Atomic<UInt64>(0)
    private let isIdle: @Sendable () -> Bool

    init(isIdle: @escaping @Sendable () -> Bool) {
        self.isIdle = isIdle
    }

    /// The last live job just ended. Cheap: one clock read, and a timer only when none is set.
    func jobsDrained() {
        lastIdleAt.store(DispatchTime.now().uptimeNanoseconds, ordering: .relaxed)
        if checkPending.compareExchange(expected: false, desired: true, ordering: .relaxed).exchanged {
            schedule(after: Self.quietSeconds)
        }
    }

    private func schedule(after seconds: Double) {
        queue.asyncAfter(deadline: .now() + seconds) { [self] in check() }
    }

    private func check() {
        let quietFor = Double(DispatchTime.now().uptimeNanoseconds - lastIdleAt.load(ordering: .relaxed)) / 1e9
        guard isIdle() else {
            // Busy again: the next drain sets a new timer.
            checkPending.store(false, ordering: .relaxed)
            return
        }
        if quietFor < Self.quietSeconds {
            schedule(after: Self.quietSeconds - quietFor)
            return
        }
        checkPending.store(false, ordering: .relaxed)
        _ = fetchd_release_free_memory()
    }
}
