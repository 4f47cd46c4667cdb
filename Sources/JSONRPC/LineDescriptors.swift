import Glibc
import Synchronization

/// The descriptors that came with one request line (SCM_RIGHTS, on the line's first byte),
/// in the order they were sent. The line's request takes them in that order (`take`: fetch's
/// `bodyFrom`, then `bodyTo`); whatever it did not take is closed once the line has been
/// handled (`closeUntaken`). A batch's requests take none: their order is not fixed.
public final class LineDescriptors: Sendable {
    private struct State {
        var fds: [Int32]
        var next = 0
    }
    private let state: Mutex<State>
    /// Told how many descriptors left the connection's keeping (taken or closed).
    private let released: @Sendable (Int) -> Void

    public init(_ fds: [Int32], released: @escaping @Sendable (Int) -> Void = { _ in }) {
        state = Mutex(State(fds: fds))
        self.released = released
    }

    /// The next descriptor, now the caller's to close; nil when none is left.
    public func take() -> Int32? {
        let fd = state.withLock { s -> Int32? in
            guard s.next < s.fds.count else { return nil }
            defer { s.next += 1 }
            return s.fds[s.next]
        }
        if fd != nil { released(1) }
        return fd
    }

    /// How many are left to take.
    public var remaining: Int { state.withLock { $0.fds.count - $0.next } }

    /// Closes every descriptor not taken. Idempotent.
    public func closeUntaken() {
        let rest = state.withLock { s -> ArraySlice<Int32> in
            defer { s.next = s.fds.count }
            return s.fds[s.next...]
        }
        for fd in rest { close(fd) }
        if !rest.isEmpty { released(rest.count) }
    }
}
