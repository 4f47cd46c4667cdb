import FetchEngine
import FoundationEssentials

/// Every host's limits, as the requests that are no job's attempt meet them (the cache's
/// background revalidations): such a request waits its turn as an attempt would, locally or
/// through Redis, gives its slot back when it ends, and its 429 or 503 with Retry-After
/// pauses the host for everyone. `HostLimitStage` admits the attempts themselves (with holds
/// a job can cancel) and shares `pauseForRetryAfter` with it.
struct HostGate: Sendable {
    let admission: HostAdmission
    /// Hosts whose limit is `shared` are admitted through Redis (`--redis`).
    let shared: SharedAdmission?
    /// The wall clock an HTTP date (Retry-After, a reset time) is read against.
    var clock = JobClock.system

    /// Calls `then(true)` once the ticket's host takes the request (at once when it has room),
    /// or `then(false)` when its queue is full or the wait failed. After `true`, the caller
    /// calls `finished` when the request ends.
    func admit(_ ticket: HostScheduler.Ticket, then: @escaping @Sendable (Bool) -> Void) {
        if let shared, case let limit = admission.limit(for: ticket.host), limit.shared {
            shared.enqueue(ticket, limit: limit) { result in then(result.isSuccess) }
            return
        }
        if admission.startNow(ticket) { return then(true) }
        do {
            try admission.enqueue(ticket) { result in then(result.isSuccess) }
        } catch {
            then(false)
        }
    }

    /// Takes a request that still waits for its host out of the queue (locally or in the
    /// shared one); `admit`'s callback then gets `false`. False when it was not waiting (it was
    /// admitted meanwhile: the caller then gives the slot back with `finished`).
    @discardableResult
    func cancel(_ ticket: HostScheduler.Ticket) -> Bool {
        if let shared, shared.cancel(ticket, error: CancellationError()) { return true }
        return admission.cancel(ticket, error: CancellationError())
    }

    /// The admitted request ended: its host may take another. True when it was admitted
    /// through Redis (its host's limit is shared).
    @discardableResult
    func finished(_ ticket: HostScheduler.Ticket) -> Bool {
        let sharedHost = shared?.finished(ticket) ?? false
        if !sharedHost { admission.finished(ticket.host) }
        return sharedHost
    }

    /// A 429 or 503 with a Retry-After in the future pauses the host for every client (for
    /// every daemon, when its limit is shared), for at most `maxSeconds`. The pause's length,
    /// or nil for any other answer.
    func pauseForRetryAfter(_ status: Int, _ headers: ResponseHeaders, host: HostKey, sharedHost: Bool,
                            maxSeconds: Double) -> Double? {
        guard RetryPolicy.retryAfterStatuses.contains(status), let retryAfter = headers.last(named: "Retry-After"),
              let seconds = RetryAfter.seconds(from: retryAfter, now: clock.wall()), seconds > 0 else { return nil }
        let pause = min(seconds, maxSeconds)
        self.pause(host, seconds: pause, sharedHost: sharedHost)
        return pause
    }

    /// The longest pause a server's budget headers cause: a reset further away is taken as
    /// this far (an hour, the longest window of the common APIs).
    static let maxServerPause = 3600.0

    /// The server's own account of its budget (`followServer`, `ServerRateLimit`), from an
    /// answer whose request still holds its slot: remembered for getRateLimits until its reset,
    /// and when the budget is spent (nothing left, or no more than the host's other running
    /// requests will take), the host pauses for every client (every daemon, when its limit is
    /// shared) until that reset, at most `maxServerPause`. Locally, the requests still left
    /// may start, and the last of them pauses the host (`HostScheduler.noteServer`). The
    /// pause's length when the host pauses now, else nil.
    func followServer(_ headers: ResponseHeaders, host: HostKey, sharedHost: Bool) -> Double? {
        guard let budget = ServerRateLimit.read(headers, now: clock.wall()), let reset = budget.resetSeconds, reset > 0 else { return nil }
        let limit = admission.limit(for: host)
        guard limit.followServer else { return nil }
        let seconds = min(reset, Self.maxServerPause)
        let pausedHere = admission.noteServer(host, remaining: budget.remaining, resetSeconds: seconds, limit: budget.limit)
        guard let shared, sharedHost || limit.shared else { return pausedHere ? seconds : nil }
        // Shared: this daemon's other running requests are the ones it knows will take some.
        guard budget.remaining - max(0, shared.running(host) - 1) <= 0 else { return nil }
        shared.pause(host, seconds: seconds)
        return seconds
    }

    /// No new start for the host for `seconds`, for every client (for every daemon, when its
    /// limit is shared); a pause only grows.
    private func pause(_ host: HostKey, seconds: Double, sharedHost: Bool) {
        if let shared, sharedHost || admission.limit(for: host).shared {
            shared.pause(host, seconds: seconds)
        } else {
            admission.pause(host, seconds: seconds)
        }
    }
}

private extension Result {
    var isSuccess: Bool { if case .success = self { true } else { false } }
}
