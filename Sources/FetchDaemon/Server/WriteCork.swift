import Glibc

/// Holds back the socket writes of answers made in one burst on one thread, so that the
/// answers one client is owed leave in one write and wake it once.
enum WriteCork {
    /// The connections with answers held back on the current thread (that thread only).
    final class Held {
        fileprivate var connections: [Connection] = []
    }

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()

    /// Runs `body` with this thread's answer writes held back, then writes them.
    static func around(_ body: () -> Void) {
        let held = Held()
        pthread_setspecific(key, Unmanaged.passUnretained(held).toOpaque())
        body()
        pthread_setspecific(key, nil)
        for connection in held.connections { connection.flushHeldBack() }
    }

    /// Where this thread holds writes back, if it does.
    static var current: Held? {
        pthread_getspecific(key).map { Unmanaged<Held>.fromOpaque($0).takeUnretainedValue() }
    }

    static func holdBack(_ connection: Connection, in held: Held) {
        held.connections.append(connection)
    }
}
