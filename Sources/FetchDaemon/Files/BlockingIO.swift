import Dispatch
import FoundationEssentials
import Glibc

/// Runs blocking file work (hashing a part file, fsync, rename) on a dispatch queue, away
/// from both the engine thread and Swift's small cooperative pool.
enum BlockingIO {
    private static let queue = DispatchQueue(label: "fetchd.blocking-io", qos: .utility, attributes: .concurrent)

    static func run<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            queue.async { continuation.resume(with: Result { try work() }) }
        }
    }
}
