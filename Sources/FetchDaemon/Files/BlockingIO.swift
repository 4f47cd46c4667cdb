import Dispatch
import FoundationEssentials
import Glibc

/// Runs blocking file work (hashing a part file, fsync, rename) on threads of its own, away
/// from both the engine thread and the daemon's task threads. Not a concurrent dispatch
/// queue: that would start libdispatch's workqueue, whose monitor wakes the process every
/// second for good (see `WorkerThreads`).
enum BlockingIO {
    private static let threads = WorkerThreads(name: "fetchd-blocking", count: 4)

    static func run<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            threads.execute { continuation.resume(with: Result { try work() }) }
        }
    }
}
