import Glibc
import Synchronization

/// Holds back the socket writes of answers made in one burst on the answer thread, so that the
/// answers one client is owed leave in one write and wake it once. One instance, made by
/// `Daemon` and handed to the answer thread (its burst wrapper) and to every connection.
final class WriteCork: @unchecked Sendable {
    /// The thread that runs bursts, once it has run one.
    private let burstThread = Atomic<UInt>(0)
    /// The connections with answers held back in the current burst; nil between bursts.
    /// Touched only by the burst thread (`isHolding` checks the thread first).
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

    /// Whether the calling thread is in a burst now (its writes wait for the burst's end).
    var isHolding: Bool {
        pthread_self() == burstThread.load(ordering: .relaxed) && held != nil
    }

    /// Burst thread only, while `isHolding`.
    func holdBack(_ connection: Connection) {
        held?.append(connection)
    }
}
