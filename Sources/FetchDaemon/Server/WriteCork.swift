import Glibc
import Synchronization

/// Holds back the socket writes of answers made on one thread, so that the answers one client
/// is owed leave in one write and wake it once. Two kinds: the answer thread's (`Daemon`
/// makes it; it holds during each burst, `around`) and each event loop's (it holds on the
/// loop's engine thread for a whole turn of that thread's loop, and `flushAndHold` writes
/// them before the thread waits).
final class WriteCork: @unchecked Sendable {
    /// The thread whose writes are held back, once it has held any.
    private let burstThread = Atomic<UInt>(0)
    /// The connections with answers held back now; nil while nothing is held (between
    /// bursts). Touched only by that thread (`isHolding` checks the thread first).
    private var held: [Connection]?

    /// Runs `body` with this thread's answer writes held back, then writes them.
    func around(_ body: () -> Void) {
        burstThread.store(pthread_self(), ordering: .relaxed)
        held = []
        body()
        let connections = held ?? []
        held = nil
        for connection in connections { connection.flushHeldBack() }
    }

    /// Writes what the calling thread held back, and holds its writes from now on until the
    /// next call: an event loop's thread calls it before each wait (and before it ends).
    func flushAndHold() {
        burstThread.store(pthread_self(), ordering: .relaxed)
        guard var connections = held, !connections.isEmpty else {
            if held == nil { held = [] }
            return
        }
        // Not holding while it writes; the list's buffer is kept for the next turn.
        held = nil
        for connection in connections { connection.flushHeldBack() }
        connections.removeAll(keepingCapacity: true)
        held = connections
    }

    /// Whether the calling thread is in a burst now (its writes wait for the burst's end).
    var isHolding: Bool {
        pthread_self() == burstThread.load(ordering: .relaxed) && held != nil
    }

    /// Burst thread only, while `isHolding`.
    func holdBack(_ connection: Connection) {
        held?.append(connection)
    }
}
