/// Bounds the memory that one group of transfers (one client's) can hold: the response bodies
/// they are receiving into memory, the answers being made from them, and the answers waiting
/// to be sent to that client.
///
/// A client that sends many requests and never reads would otherwise make the daemon hold
/// every body: 20 fetches of 20 MB took it to 1.07 GB. Over the bound, a transfer's write
/// callback pauses it (CURL_WRITEFUNC_PAUSE, as a download does while its hash catches up)
/// until the client has read enough. So that a client that does read always makes progress,
/// a transfer may go past the bound when every other transfer that holds bytes is paused and
/// less than the bound waits to be sent or is being made into an answer; with a client that
/// reads nothing the bound then holds, give or take one answer.
///
/// The common case (under the bound) is a lock and two additions; the bookkeeping of paused
/// transfers is only touched over the bound. `take` and `transferEnded` run on the engine
/// thread, the rest on any thread.
public final class BodyBudget: Sendable {
    public let limit: Int
    private let state = Locked(State())

    private struct State {
        /// Answers queued for the client and not yet written to its socket.
        var outbound = 0
        /// Of the last `outboundChanged`: reports that arrive out of order are ignored.
        var outboundVersion: UInt64 = 0
        /// Bytes held by running transfers and by answers being made.
        var held = 0
        /// Of those, the answers being made: until they are queued, nobody goes past the bound
        /// (else a client that never reads has every body turned into an answer at once).
        var making = 0
        /// Transfers holding bytes.
        var holders = 0
        /// Paused transfers: how to unpause each, and whether it holds bytes.
        var paused: [UInt64: (resume: @Sendable () -> Void, holds: Bool)] = [:]
        var pausedHolders = 0
        /// The client is gone: nothing is held back any more.
        var unbounded = false
    }

    public init(limit: Int) {
        self.limit = limit
    }

    /// Bytes of answers and notifications waiting for the client to read them.
    public var outboundBytes: Int { state.withLock { $0.outbound } }

    /// Whether transfer `id`, which holds `holding` bytes already, may keep `bytes` more;
    /// false: pause it, and `resume` is called (from any thread) when it may try again.
    func take(_ bytes: Int, for id: UInt64, holding: Int, resume: @escaping @Sendable () -> Void) -> Bool {
        state.withLock { s in
            let holds = holding > 0
            let others = s.holders - (holds ? 1 : 0)
            guard s.unbounded || s.held + s.outbound + bytes <= limit
                    || (s.outbound + s.making < limit && s.pausedHolders >= others) else {
                if s.paused.updateValue((resume, holds), forKey: id) == nil, holds { s.pausedHolders += 1 }
                return false
            }
            if !holds { s.holders += 1 }
            s.held += bytes
            return true
        }
    }

    /// The transfer ended, holding `holding` bytes: they are its answer's now (queued
    /// already, or counted by `answerPending`), or gone with a failed attempt.
    func transferEnded(_ id: UInt64, holding: Int) {
        let wake = state.withLock { s -> [@Sendable () -> Void] in
            if holding > 0 {
                s.held -= holding
                s.holders -= 1
            }
            if let gone = s.paused.removeValue(forKey: id), gone.holds { s.pausedHolders -= 1 }
            return takeWakeable(&s)
        }
        for resume in wake { resume() }
    }

    /// A body read without a transfer (an HTTP cache hit read from disk) asks as a transfer
    /// does: true when `bytes` more may be held now (give them back with `released` once the
    /// answer is handed on); false: `resume` is called, from any thread, when to ask again.
    public func reserve(_ bytes: Int, for id: UInt64, resume: @escaping @Sendable () -> Void) -> Bool {
        take(bytes, for: id, holding: 0, resume: resume)
    }

    /// What `reserve` took is now the answer's (counted by `answerPending` or once queued).
    public func released(_ id: UInt64, holding bytes: Int) {
        transferEnded(id, holding: bytes)
    }

    /// An answer of `bytes` is being made away from the transfer's thread: held until queued.
    public func answerPending(_ bytes: Int) {
        state.withLock { s in
            s.held += bytes
            s.making += bytes
        }
    }

    /// That answer is queued (and counted in `outbound`).
    public func answerQueued(_ bytes: Int) {
        let wake = state.withLock { s -> [@Sendable () -> Void] in
            s.held -= bytes
            s.making -= bytes
            return takeWakeable(&s)
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
            return drained ? takeWakeable(&s) : []
        }
        for resume in wake { resume() }
    }

    /// The client is gone (its detached jobs run on): the bound no longer applies.
    public func lift() {
        let wake = state.withLock { s -> [@Sendable () -> Void] in
            s.unbounded = true
            s.outbound = 0
            return takeWakeable(&s)
        }
        for resume in wake { resume() }
    }

    /// For tests: bytes held, answers waiting, transfers paused.
    public var snapshot: (held: Int, outbound: Int, paused: Int) {
        state.withLock { ($0.held, $0.outbound, $0.paused.count) }
    }

    /// Every paused transfer, once one of them can go on: there is room, or none of the
    /// transfers holding bytes is running (each asks again; those still over the bound pause
    /// again, and the last to ask goes on).
    private func takeWakeable(_ s: inout State) -> [@Sendable () -> Void] {
        guard !s.paused.isEmpty else { return [] }
        if !s.unbounded {
            guard s.outbound + s.making < limit, s.held + s.outbound < limit || s.pausedHolders >= s.holders else { return [] }
        }
        let wake = s.paused.values.map(\.resume)
        s.paused.removeAll()
        s.pausedHolders = 0
        return wake
    }
}
