import Dispatch
import FoundationEssentials
import Glibc
import Synchronization

/// Drives a `HostScheduler` with the real clock: requests wait here until their host may
/// take them, a timer wakes the queue when a rate or a pause allows the next start, and
/// every client's requests share the same limits.
public final class HostAdmission: Sendable {
    public typealias Admitted = @Sendable (Result<Void, any Error>) -> Void

    private struct State {
        var scheduler: HostScheduler
        var waiters: [UInt64: Admitted] = [:]
        var timerDeadline: Double?
    }

    private let state: Locked<State>
    /// Whether any limit is `adaptive`: without one, an attempt's end costs no lock for it.
    private let anyAdaptive: Atomic<Bool>
    /// The bandwidth budgets (`maxRecvBytesPerSecond`): one bucket per host key whose own
    /// entry has one, and the daemon's (the `*` entry's). Buckets live as long as their
    /// budget, and are retuned in place when it changes, so running transfers follow.
    private let bandwidth = Locked(Bandwidth())
    private let anyBudget: Atomic<Bool>

    private struct Bandwidth {
        var hosts: [HostKey: BandwidthBucket] = [:]
        var daemon: BandwidthBucket?
    }
    /// Rescheduled only under the lock; dispatch sources are themselves thread-safe.
    private nonisolated(unsafe) let timer: any DispatchSourceTimer
    private let origin = DispatchTime.now()

    public init(scheduler: HostScheduler) {
        state = Locked(State(scheduler: scheduler))
        anyAdaptive = Atomic(scheduler.limits.values.contains { $0.adaptive })
        anyBudget = Atomic(scheduler.limits.values.contains { $0.maxRecvBytesPerSecond != nil })
        timer = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "fetchd.admission"))
        timer.schedule(deadline: .distantFuture)
        timer.setEventHandler { [weak self] in self?.pump() }
        timer.resume()
    }

    deinit { timer.cancel() }

    /// Seconds on the monotonic clock since this object was made.
    public var now: Double { Double(DispatchTime.now().uptimeNanoseconds - origin.uptimeNanoseconds) / 1e9 }

    /// A time on `now`'s clock as `DispatchTime.uptimeNanoseconds`, for an absolute deadline.
    public func uptimeNanoseconds(at time: Double) -> UInt64 {
        origin.uptimeNanoseconds + UInt64((max(0, time) * 1e9).rounded(.up))
    }

    /// Queues a request; `admitted` is called once, when it may start (or with an error
    /// when it was cancelled). Throws `Overloaded` at once when the queue is full.
    public func enqueue(_ ticket: HostScheduler.Ticket, alreadyAccepted: Bool = false,
                        admitted: @escaping Admitted) throws(HostScheduler.Overloaded) {
        try state.withLock { s throws(HostScheduler.Overloaded) in
            try s.scheduler.enqueue(ticket, alreadyAccepted: alreadyAccepted)
            s.waiters[ticket.id] = admitted
        }
        pump()
    }

    /// Starts the request now if its host allows it without waiting (no callback then).
    public func startNow(_ ticket: HostScheduler.Ticket) -> Bool {
        state.withLock { $0.scheduler.startNow(ticket, now: now) }
    }

    /// Takes a waiting request out of the queue; its callback gets `error`. False when it
    /// was not waiting.
    @discardableResult
    public func cancel(_ ticket: HostScheduler.Ticket, error: any Error) -> Bool {
        let waiter = state.withLock { s -> Admitted? in
            guard s.scheduler.cancel(ticketID: ticket.id, host: ticket.host) else { return nil }
            return s.waiters.removeValue(forKey: ticket.id)
        }
        waiter?(.failure(error))
        return waiter != nil
    }

    /// A started request ended: its host may take another.
    public func finished(_ host: HostKey) {
        let idle = state.withLock { s -> Bool in
            s.scheduler.finished(host: host)
            // Nothing waits and no timer is set: nothing to admit or to schedule.
            return s.scheduler.queued == 0 && s.timerDeadline == nil && s.scheduler.hosts.count < 64
        }
        if !idle { pump() }
    }

    /// Holds new starts for the host for `seconds`, for every client.
    public func pause(_ host: HostKey, seconds: Double) {
        let until = now + seconds
        state.withLock { $0.scheduler.pause(host: host, until: until) }
        pump()
    }

    /// An answer said how many requests the server still takes in the `resetSeconds` until its
    /// reset (`HostScheduler.noteServer`): true when the host is paused until then.
    @discardableResult
    public func noteServer(_ host: HostKey, remaining: Int, resetSeconds: Double, limit: Int? = nil) -> Bool {
        let paused = state.withLock { s in
            let now = self.now
            return s.scheduler.noteServer(host: host, remaining: remaining, resetAt: now + resetSeconds, limit: limit, now: now)
        }
        if paused { pump() }
        return paused
    }

    /// How an attempt of an `adaptive` host ended, before its slot is given back
    /// (`HostScheduler.adapt`).
    public func adapt(_ host: HostKey, overloaded: Bool, elapsed: Double) {
        guard anyAdaptive.load(ordering: .relaxed) else { return }
        state.withLock { s in s.scheduler.adapt(host: host, overloaded: overloaded, elapsed: elapsed, now: now) }
    }

    /// Whether any limit is `adaptive` (else `adapt` does nothing).
    public var hasAdaptiveLimits: Bool { anyAdaptive.load(ordering: .relaxed) }

    /// The limit that applies to a host now.
    public func limit(for host: HostKey) -> HostScheduler.Limit {
        state.withLock { $0.scheduler.limit(for: host) }
    }

    public func setLimit(_ limit: HostScheduler.Limit, for pattern: String) {
        let limits = state.withLock { s in
            s.scheduler.setLimit(limit, for: pattern)
            return s.scheduler.limits
        }
        limitsChanged(limits)
        pump()
    }

    public func removeLimit(for pattern: String) {
        let limits = state.withLock { s in
            s.scheduler.removeLimit(for: pattern)
            return s.scheduler.limits
        }
        limitsChanged(limits)
        pump()
    }

    /// The flags follow the new limits, and the budgets' buckets their new numbers.
    private func limitsChanged(_ limits: [String: HostScheduler.Limit]) {
        anyAdaptive.store(limits.values.contains { $0.adaptive }, ordering: .relaxed)
        anyBudget.store(limits.values.contains { $0.maxRecvBytesPerSecond != nil }, ordering: .relaxed)
        bandwidth.withLock { b in
            let daemonRate = limits["*"]?.maxRecvBytesPerSecond
            b.daemon?.retune(bytesPerSecond: daemonRate)
            if daemonRate == nil { b.daemon = nil }
            for (host, bucket) in b.hosts {
                // The host's own entry's budget (`*`'s is the daemon's, not each host's).
                let rate = (limits[host.nameAndPort] ?? limits[host.name])?.maxRecvBytesPerSecond
                bucket.retune(bytesPerSecond: rate)
                if rate == nil { b.hosts[host] = nil }
            }
        }
    }

    /// The bandwidth budgets a transfer to `host` draws from besides its own cap: its host's
    /// (from the host's own entry) and the whole daemon's (the `*` entry's). Empty, at the
    /// cost of one atomic load, while no entry has a budget.
    public func receiveBudgets(for host: HostKey) -> [BandwidthBucket] {
        guard anyBudget.load(ordering: .relaxed) else { return [] }
        let (hostRate, daemonRate) = state.withLock { s in
            (s.scheduler.limitEntry(for: host) == "*" ? nil : s.scheduler.limit(for: host).maxRecvBytesPerSecond,
             s.scheduler.limits["*"]?.maxRecvBytesPerSecond)
        }
        return bandwidth.withLock { b in
            var budgets: [BandwidthBucket] = []
            if let hostRate {
                if b.hosts[host] == nil { b.hosts[host] = BandwidthBucket(bytesPerSecond: hostRate) }
                budgets.append(b.hosts[host]!)
            }
            if let daemonRate {
                if b.daemon == nil { b.daemon = BandwidthBucket(bytesPerSecond: daemonRate) }
                budgets.append(b.daemon!)
            }
            return budgets
        }
    }

    /// A consistent copy of the scheduler (limits, hosts, queue) and the clock reading it
    /// belongs to.
    public func snapshot() -> (scheduler: HostScheduler, now: Double) {
        let now = self.now
        return (state.withLock { $0.scheduler }, now)
    }

    /// Starts whatever may start, then sets the timer for the next time-bound start.
    private func pump() {
        let (ready, wakeup) = state.withLock { s -> ([Admitted], Double?) in
            // Read under the lock: starts are counted in the order and at the time they are
            // decided, not at a moment before a wait for the lock.
            let now = self.now
            s.scheduler.expire(now: now)
            let admitted = s.scheduler.admit(now: now).compactMap { s.waiters.removeValue(forKey: $0.id) }
            let next = s.scheduler.nextWakeup(now: now)
            if next != s.timerDeadline {
                s.timerDeadline = next
                if let next {
                    // An absolute deadline on `now`'s clock, so that the time since `now` was
                    // read (or a preemption) does not make the timer late.
                    timer.schedule(deadline: DispatchTime(uptimeNanoseconds: uptimeNanoseconds(at: next)), leeway: .nanoseconds(0))
                } else {
                    timer.schedule(deadline: .distantFuture)
                }
            }
            return (admitted, next)
        }
        _ = wakeup
        for admitted in ready { admitted(.success(())) }
    }
}
