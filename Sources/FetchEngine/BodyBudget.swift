/// Bounds the memory that one group of transfers (one client's) can hold: the response bodies
/// they are receiving into memory plus the answers waiting to be sent to that client.
///
/// A client that sends many requests and never reads would otherwise make the daemon hold
/// every body: 20 fetches of 20 MB took it to 1.07 GB. Over the bound, a transfer's write
/// callback pauses it (CURL_WRITEFUNC_PAUSE, as a download does while its hash catches up)
/// until the client has read enough. So that a client that does read always makes progress,
/// the oldest transfer that holds bytes may go past the bound as long as what waits to be
/// sent is under it; with a client that reads nothing the bound then holds, give or take one
/// answer.
///
/// `take` and `release` run on the engine thread; `outboundChanged` on any thread.
public final class BodyBudget: Sendable {
    public let limit: Int
    private let state = Locked(State())

    private struct State {
        /// Answers queued for the client and not yet written to its socket.
        var outbound = 0
        /// Of the last `outboundChanged`: reports that arrive out of order are ignored.
        var outboundVersion: UInt64 = 0
        /// The client is gone: nothing is held back any more.
        var unbounded = false
        /// Body bytes held by each transfer, by transfer id (ids grow: the smallest is oldest).
        var held: [UInt64: Int] = [:]
        var heldTotal = 0
        /// Paused transfers, and how to unpause each.
        var paused: [UInt64: @Sendable () -> Void] = [:]
    }

    public init(limit: Int) {
        self.limit = limit
    }

    /// Whether transfer `id` may keep `bytes` more; false: pause it, and `resume` is called
    /// (from any thread) when it may try again.
    func take(_ bytes: Int, for id: UInt64, resume: @escaping @Sendable () -> Void) -> Bool {
        state.withLock { s in
            let fits = s.unbounded || s.heldTotal + s.outbound + bytes <= limit
            if fits || (s.outbound < limit && isOldest(id, in: s)) {
                s.held[id, default: 0] += bytes
                s.heldTotal += bytes
                return true
            }
            s.paused[id] = resume
            return false
        }
    }

    /// What transfer `id` held is gone: its attempt failed (the engine), or its answer is
    /// queued for the client, where `outbound` counts it (the daemon). Twice is harmless.
    public func release(_ id: UInt64) {
        let wake = state.withLock { s -> [@Sendable () -> Void] in
            s.heldTotal -= s.held.removeValue(forKey: id) ?? 0
            s.paused[id] = nil
            return Self.takeWakeable(&s, limit: limit)
        }
        for resume in wake { resume() }
    }

    /// The bytes now waiting to be written to the client, as of `version` (which grows with
    /// every report, so that a report overtaken by a newer one on another thread is ignored).
    public func outboundChanged(to bytes: Int, version: UInt64) {
        let wake = state.withLock { s -> [@Sendable () -> Void] in
            guard version > s.outboundVersion else { return [] }
            s.outboundVersion = version
            let drained = bytes < s.outbound
            s.outbound = bytes
            return drained ? Self.takeWakeable(&s, limit: limit) : []
        }
        for resume in wake { resume() }
    }

    /// The client is gone (its detached jobs run on): the bound no longer applies.
    public func lift() {
        let wake = state.withLock { s -> [@Sendable () -> Void] in
            s.unbounded = true
            s.outbound = 0
            return Self.takeWakeable(&s, limit: limit)
        }
        for resume in wake { resume() }
    }

    /// For tests and getStatus: body bytes held, answers waiting, transfers paused.
    public var snapshot: (held: Int, outbound: Int, paused: Int) {
        state.withLock { ($0.heldTotal, $0.outbound, $0.paused.count) }
    }

    private func isOldest(_ id: UInt64, in s: State) -> Bool {
        guard let oldest = s.held.keys.min() else { return true }
        return id <= oldest
    }

    /// Every paused transfer, once one of them can go on: there is room, or the oldest is
    /// among them (each asks again, and the ones still over the bound pause again).
    private static func takeWakeable(_ s: inout State, limit: Int) -> [@Sendable () -> Void] {
        guard !s.paused.isEmpty else { return [] }
        if !s.unbounded {
            guard s.outbound < limit else { return [] }
            let oldest = min(s.held.keys.min() ?? .max, s.paused.keys.min() ?? .max)
            guard s.heldTotal + s.outbound < limit || s.paused[oldest] != nil else { return [] }
        }
        let wake = Array(s.paused.values)
        s.paused.removeAll()
        return wake
    }
}
