import FetchEngine

/// The thread of a stub store on which searches that may take long take turns: each turn
/// spends about `sliceSteps` (0.5 ms) and the search then goes to the back of the queue. A
/// search that takes seconds (many patterns, a long URL) delays another by a slice per
/// search ahead of it, and never holds the threads that read requests or the store's lock.
/// Started with the first search that needs it: a daemon without such stubs has no thread
/// for them.
final class StubMatchingThread: Sendable {
    static let sliceSteps = 50_000

    private let threads = Locked<WorkerThreads?>(nil)

    /// Runs `turn` with a budget of steps, turn after turn, until it returns true.
    func run(_ turn: @escaping @Sendable (_ budget: inout Int) -> Bool) {
        let threads = threads.withLock { t in
            if t == nil { t = WorkerThreads(name: "fetchd-stubs", count: 1) }
            return t!
        }
        Self.queue(turn, on: threads)
    }

    private static func queue(_ turn: @escaping @Sendable (inout Int) -> Bool, on threads: WorkerThreads) {
        threads.execute {
            var budget = sliceSteps
            if !turn(&budget) { queue(turn, on: threads) }
        }
    }
}
