/// Decides when each request may start, per host: at most `maxConcurrent` at once, and a
/// token bucket (GCRA) of `requestsPerSecond` with `burst`, so that in any window of T
/// seconds at most burst + rps x (T + slack) requests start, where the slack (half an
/// interval, at most 2 ms) is how late a start may be and still keep its place in the
/// schedule (docs/rate-limits.md has the rule and the proof). Waiting requests start by
/// priority (higher first), first come first served among equals. A host can be paused (a 429 or
/// 503 with Retry-After) for every client at once.
///
/// Pure: time is an argument of every call (seconds on a monotonic clock), nothing sleeps,
/// so tests move the clock by assignment. `HostAdmission` drives it with a real clock.
public struct HostScheduler: Sendable {
    public struct Limit: Sendable, Equatable {
        /// nil: no cap on concurrent requests.
        public var maxConcurrent: Int?
        /// nil: no rate limit.
        public var requestsPerSecond: Double?
        public var burst: Int
        /// Counted in Redis for every daemon that uses the same Redis (`--redis`); the
        /// daemon's `SharedAdmission` admits such hosts, not this scheduler.
        public var shared = false
        /// What a shared limit does while Redis cannot be reached.
        public var onRedisDown = RedisDownMode.local
        /// The part of a shared limit this daemon enforces alone while Redis is down (`local`).
        public var localShare = 1.0
        /// Answers that say the server's budget is spent (`ServerRateLimit`) pause the host
        /// until the server's reset.
        public var followServer = true
        /// The host's concurrency adapts to its answers between 1 and `maxConcurrent`
        /// (`AdaptiveConcurrency`).
        public var adaptive = false
        /// Bytes a second of response bodies that all the host's transfers share (the `*`
        /// entry's: the whole daemon's); nil: no budget. Held by `HostAdmission`'s buckets.
        public var maxRecvBytesPerSecond: Int?

        /// The entry a new one starts from: this one, without the daemon's budget (a `*`
        /// entry's `maxRecvBytesPerSecond` is the whole daemon's, not each host's).
        public var asNewEntry: Limit {
            var copy = self
            copy.maxRecvBytesPerSecond = nil
            return copy
        }

        public enum RedisDownMode: String, Sendable, Equatable {
            /// Each daemon enforces `localShare` x the limit by itself.
            case local
            /// Shared requests wait until Redis is back.
            case wait
        }

        public init(maxConcurrent: Int? = 10, requestsPerSecond: Double? = nil, burst: Int = 1) {
            self.maxConcurrent = maxConcurrent
            self.requestsPerSecond = requestsPerSecond
            self.burst = max(1, burst)
        }

        /// `localShare` x this limit, enforced by one daemon alone: the rate scaled, the cap
        /// and the burst scaled and rounded down (at least 1), not shared.
        public var localPart: Limit {
            var part = Limit(maxConcurrent: maxConcurrent.map { max(1, Int((Double($0) * localShare).rounded(.down))) },
                             requestsPerSecond: requestsPerSecond.map { $0 * localShare },
                             burst: max(1, Int((Double(burst) * localShare).rounded(.down))))
            part.localShare = localShare
            part.followServer = followServer
            part.adaptive = adaptive
            return part
        }

        /// What a request of `cost` takes of the rate: its cost, at most the burst (a request
        /// that asks for more waits for a full bucket; the daemon refuses such a cost when the
        /// request comes, but a burst lowered later must not hold it forever).
        public func weight(_ cost: Double) -> Double {
            min(max(cost, 0), Double(burst))
        }

        /// How late a start may come and still count from its due time rather than from
        /// when it happened: half an interval, at most `maxSlack`; 0 without a rate.
        public var slack: Double {
            guard let rps = requestsPerSecond, rps > 0 else { return 0 }
            return min(0.5 / rps, HostScheduler.maxSlack)
        }
    }

    /// The most slack any rate gets: covers a timer that fires late by a few tenths of a
    /// millisecond (as the admission timer does), with room to spare on a busy machine.
    public static let maxSlack = 0.002

    public struct Ticket: Sendable, Equatable {
        public let id: UInt64
        public let host: HostKey
        public let priority: Int
        /// How many units of the host's `requestsPerSecond` the request takes (`cost`; 1 for
        /// most): tokens, say, for an API that limits tokens per second.
        public let cost: Double
        public init(id: UInt64, host: HostKey, priority: Int, cost: Double = 1) {
            self.id = id
            self.host = host
            self.priority = priority
            self.cost = cost
        }
    }

    public struct Overloaded: Error, Sendable, Equatable {
        public let limit: Int
    }

    /// What one host is doing, for `getRateLimits`.
    public struct HostState: Sendable, Equatable {
        public var running = 0
        public var waiting: [Ticket] = []
        /// GCRA's theoretical arrival time: the next start conforms once now >= tat - (burst - 1) / rps.
        public var theoreticalArrival: Double = -Double.infinity
        public var pausedUntil: Double?
        /// What the server last said of its budget (`followServer`), until its reset.
        public var server: ServerBudget?
        /// The concurrency an `adaptive` limit has learned; nil while it is `maxConcurrent`.
        public var adaptive: AdaptiveConcurrency?

        /// How many may run at once: `maxConcurrent`, or less while an adaptive limit holds
        /// the host lower (nil: no cap).
        public func concurrencyNow(_ limit: Limit) -> Int? {
            guard let cap = limit.maxConcurrent else { return nil }
            guard limit.adaptive, let adaptive else { return cap }
            return min(cap, adaptive.current)
        }

        /// Nothing left to remember once nothing runs (`running`: what still runs).
        fileprivate func isIdle(running: Int) -> Bool {
            running == 0 && waiting.isEmpty && pausedUntil == nil && theoreticalArrival == -Double.infinity && server == nil
                && adaptive == nil
        }

        /// Counts a start against the host's concurrency and its rate. A start at most the
        /// slack after `tat` (a timer that fired late) counts from `tat`, so the lateness
        /// does not push the rest of the schedule back; a later one (after an idle gap)
        /// counts from `now`, as GCRA does. Either way `tat` grows by at least `cost`
        /// intervals per start and never lags `now` by more than the slack: that keeps the
        /// window bound (in units of cost).
        fileprivate mutating func start(now: Double, limit: Limit, cost: Double = 1) {
            running += 1
            if server != nil { countServerStart(now: now) }
            if let rps = limit.requestsPerSecond, rps > 0 {
                let from = now <= theoreticalArrival + limit.slack ? theoreticalArrival : now
                theoreticalArrival = from + limit.weight(cost) / rps
            }
        }

        /// A start takes one of the requests the server said it would still take; the last
        /// of them pauses the host until the server's reset.
        private mutating func countServerStart(now: Double) {
            guard var budget = server else { return }
            budget.startsLeft -= 1
            server = budget
            if budget.startsLeft <= 0, budget.resetAt > now, budget.resetAt.isFinite {
                pausedUntil = max(pausedUntil ?? budget.resetAt, budget.resetAt)
            }
        }

        /// Higher priority first; equal priority keeps arrival order (searching from the
        /// back, since new requests usually go last).
        fileprivate mutating func insert(_ ticket: Ticket) {
            var index = waiting.endIndex
            while index > waiting.startIndex, waiting[index - 1].priority < ticket.priority { index -= 1 }
            waiting.insert(ticket, at: index)
        }
    }

    public private(set) var limits: [String: Limit] {
        didSet { onlyDefault = limits.count == 1 ? limits["*"] : nil }
    }
    /// The `*` limit when it is the only one (the common case): no lookup by name.
    private var onlyDefault: Limit?
    public private(set) var hosts: [HostKey: HostState] = [:]
    public let maxQueued: Int
    private var queuedCount = 0
    private var nextSequence: UInt64 = 0

    public static let defaultMaxQueued = 10_000

    public init(defaultLimit: Limit = Limit(), maxQueued: Int = HostScheduler.defaultMaxQueued) {
        limits = ["*": defaultLimit]
        onlyDefault = defaultLimit
        self.maxQueued = maxQueued
    }

    // MARK: limits

    /// The limit for a host: its `name:port` entry, else its `name` entry, else `*`.
    public func limit(for host: HostKey) -> Limit {
        // Only `*`: no lookups by name (the common case, on every request).
        if let onlyDefault { return onlyDefault }
        return limits[host.nameAndPort] ?? limits[host.name] ?? limits["*"] ?? Limit()
    }

    /// Which configured entry a host's limit comes from.
    public func limitEntry(for host: HostKey) -> String {
        if limits[host.nameAndPort] != nil { return host.nameAndPort }
        if limits[host.name] != nil { return host.name }
        return "*"
    }

    public mutating func setLimit(_ limit: Limit, for pattern: String) {
        limits[pattern.lowercased()] = limit
    }

    public mutating func removeLimit(for pattern: String) {
        guard pattern != "*" else { return }
        limits[pattern.lowercased()] = nil
    }

    // MARK: requests

    public var queued: Int { queuedCount }

    /// Adds a request to its host's queue; past `maxQueued` waiting requests a new one is
    /// refused and nothing already queued is dropped. `admitted` requests (a retry of a job
    /// already accepted) are never refused.
    public mutating func enqueue(_ ticket: Ticket, alreadyAccepted: Bool = false) throws(Overloaded) {
        guard queuedCount < maxQueued || alreadyAccepted else { throw Overloaded(limit: maxQueued) }
        // Mutated in place: copying a host's state out and back would copy its whole queue.
        hosts[ticket.host, default: HostState()].insert(ticket)
        queuedCount += 1
    }

    /// Starts a request at once when its host has nobody waiting and room now: the common
    /// case, which then needs no queueing and no wake-up. False: enqueue it instead.
    public mutating func startNow(_ ticket: Ticket, now: Double) -> Bool {
        let limit = self.limit(for: ticket.host)
        // One lookup: the host's place in the table, then changed in place.
        if let index = hosts.index(forKey: ticket.host) {
            guard hosts.values[index].waiting.isEmpty, canStart(hosts.values[index], limit: limit, now: now, cost: ticket.cost)
            else { return false }
            hosts.values[index].start(now: now, limit: limit, cost: ticket.cost)
        } else {
            guard limit.maxConcurrent != 0 else { return false }
            var state = HostState()
            state.start(now: now, limit: limit, cost: ticket.cost)
            hosts[ticket.host] = state
        }
        return true
    }

    /// Removes a waiting request. False when it was not waiting (already admitted or unknown).
    @discardableResult
    public mutating func cancel(ticketID: UInt64, host: HostKey) -> Bool {
        guard let index = hosts[host]?.waiting.firstIndex(where: { $0.id == ticketID }) else { return false }
        hosts[host]?.waiting.remove(at: index)
        queuedCount -= 1
        forgetIfIdle(host)
        return true
    }

    /// The requests that may start now, in the order they should start. Each is counted as
    /// running until `finished`.
    public mutating func admit(now: Double) -> [Ticket] {
        var started: [Ticket] = []
        for host in Array(hosts.keys) {
            // Moved out and back: mutating a copy would copy the whole queue every time.
            guard var state = hosts.removeValue(forKey: host) else { continue }
            let limit = self.limit(for: host)
            var count = 0
            while count < state.waiting.count, canStart(state, limit: limit, now: now, cost: state.waiting[count].cost) {
                started.append(state.waiting[count])
                state.start(now: now, limit: limit, cost: state.waiting[count].cost)
                count += 1
            }
            if count > 0 {
                state.waiting.removeFirst(count)
                queuedCount -= count
            }
            hosts[host] = state
        }
        return started
    }

    public mutating func finished(host: HostKey) {
        guard let index = hosts.index(forKey: host) else { return }
        let state = hosts.values[index]
        if state.isIdle(running: max(0, state.running - 1)) {
            hosts.remove(at: index)  // nothing left to remember
        } else {
            hosts.values[index].running = max(0, state.running - 1)
            // The quota after a reset is spent and nothing that runs will say more: no bound.
            if state.running <= 1, let server = state.server, !server.resetAt.isFinite, server.startsLeft <= 0 {
                hosts.values[index].server = nil
            }
        }
    }

    /// No new starts for this host until `until` (a Retry-After), for every client.
    public mutating func pause(host: HostKey, until: Double) {
        let current = hosts[host]?.pausedUntil ?? until
        hosts[host, default: HostState()].pausedUntil = max(current, until)
    }

    /// An answer of the host said how many requests the server still takes until `resetAt`
    /// (`followServer`). The requests running besides that answer's (`running` counts it) will
    /// take some of them; the rest may start, and once they have, or when none is left, the
    /// host pauses until the reset, for every client. Before the reset the server knows of, a
    /// later answer can only lower what is left (answers come back in any order). Shown by getRateLimits until the reset.
    /// After it, when the server said its window's quota (`limit`), no more than that start
    /// before an answer says more (or nothing runs any more). True when the host is paused now.
    @discardableResult
    public mutating func noteServer(host: HostKey, remaining: Int, resetAt: Double, limit: Int? = nil, now: Double) -> Bool {
        var state = hosts.removeValue(forKey: host) ?? HostState()
        var budget = ServerBudget(remaining: remaining, resetAt: resetAt, startsLeft: remaining - max(0, state.running - 1),
                                  limit: limit)
        if let old = state.server, old.resetAt.isFinite, old.resetAt > now {
            // The same window: answers come back in any order, and what is left only goes down.
            budget.remaining = min(budget.remaining, old.remaining)
            budget.startsLeft = min(budget.startsLeft, old.startsLeft)
            budget.resetAt = max(budget.resetAt, old.resetAt)
            budget.limit = budget.limit ?? old.limit
        }
        state.server = budget
        let resetAt = budget.resetAt
        let spent = budget.startsLeft <= 0 && resetAt > now
        if spent { state.pausedUntil = max(state.pausedUntil ?? resetAt, resetAt) }
        hosts[host] = state
        return spent
    }

    /// How an attempt of an `adaptive` host ended (its slot not yet given back): `overloaded`
    /// (a 429, a 503, a timeout) halves the host's concurrency, a run of other answers raises
    /// it again (`AdaptiveConcurrency`). `elapsed`: how long the request ran.
    public mutating func adapt(host: HostKey, overloaded: Bool, elapsed: Double, now: Double) {
        let limit = self.limit(for: host)
        guard limit.adaptive, let ceiling = limit.maxConcurrent, let index = hosts.index(forKey: host) else { return }
        var adaptive = hosts.values[index].adaptive ?? AdaptiveConcurrency(ceiling: ceiling)
        if overloaded {
            adaptive.overloaded(elapsed: elapsed, now: now, ceiling: ceiling)
        } else {
            adaptive.succeeded(ceiling: ceiling)
        }
        hosts.values[index].adaptive = adaptive.isAtCeiling(ceiling) ? nil : adaptive
    }

    /// When `admit` should next be called to start a waiting request held back by a rate
    /// or a pause (nil when nothing waits on time: only on a running request to finish).
    public func nextWakeup(now: Double) -> Double? {
        var earliest: Double? = nil
        for (host, state) in hosts where !state.waiting.isEmpty {
            let limit = self.limit(for: host)
            if let cap = state.concurrencyNow(limit), state.running >= cap { continue }
            if state.server?.awaitsAnswer == true { continue }  // woken by an answer or an end
            var at = now
            if let paused = state.pausedUntil, paused > now { at = max(at, paused) }
            if let rps = limit.requestsPerSecond, rps > 0, let first = state.waiting.first {
                at = max(at, state.theoreticalArrival - (Double(limit.burst) - limit.weight(first.cost)) / rps)
            }
            earliest = min(earliest ?? at, at)
        }
        return earliest
    }

    private func canStart(_ state: HostState, limit: Limit, now: Double, cost: Double) -> Bool {
        if let cap = state.concurrencyNow(limit), state.running >= cap { return false }
        if let server = state.server, server.awaitsAnswer { return false }
        if let paused = state.pausedUntil, paused > now { return false }
        if let rps = limit.requestsPerSecond, rps > 0 {
            // GCRA: conforming while the bucket has room for the request's cost (one more of
            // the burst, for most). A tiny tolerance keeps floating-point rounding from
            // delaying an exact start.
            return now + 1e-9 >= state.theoreticalArrival - (Double(limit.burst) - limit.weight(cost)) / rps
        }
        return true
    }

    /// Forgets a host with nothing left to remember, so the table does not grow forever.
    private mutating func forgetIfIdle(_ host: HostKey) {
        guard let state = hosts[host], state.isIdle(running: state.running) else { return }
        hosts[host] = nil
    }

    /// Drops pauses that have ended and buckets that have refilled, then idle hosts. A
    /// bucket is forgotten only once `tat` is more than `maxSlack` behind: until then the
    /// next start may still count from it.
    public mutating func expire(now: Double) {
        for host in Array(hosts.keys) {
            if let paused = hosts[host]?.pausedUntil, paused <= now { hosts[host]?.pausedUntil = nil }
            if hosts[host]?.adaptive != nil, !limit(for: host).adaptive { hosts[host]?.adaptive = nil }
            if let server = hosts[host]?.server, server.resetAt <= now || !server.resetAt.isFinite {
                // The server's window has reset: its whole quota (when known) may start, and no
                // more before an answer says more. An idle host's is forgotten.
                let busy = hosts[host].map { $0.running > 0 || !$0.waiting.isEmpty } ?? false
                if !busy {
                    hosts[host]?.server = nil
                } else if server.resetAt.isFinite {
                    hosts[host]?.server = server.limit.map { ServerBudget(remaining: $0, resetAt: .infinity, startsLeft: $0, limit: $0) }
                }
            }
            if let tat = hosts[host]?.theoreticalArrival, tat <= now - HostScheduler.maxSlack, tat != -Double.infinity {
                hosts[host]?.theoreticalArrival = -Double.infinity
            }
            forgetIfIdle(host)
        }
    }
}

/// A server's own account of its request budget (`ServerRateLimit`), on the scheduler's clock.
public struct ServerBudget: Sendable, Equatable {
    /// Requests the server said it still takes before `resetAt`.
    public var remaining: Int
    public var resetAt: Double
    /// Of those, the ones this daemon may still start (the others were running when it said so).
    public var startsLeft: Int
    /// The requests a whole window takes, when the server said.
    public var limit: Int?

    /// `resetAt` is infinite after a reset, until an answer says when the next one is.
    public init(remaining: Int, resetAt: Double, startsLeft: Int? = nil, limit: Int? = nil) {
        self.remaining = remaining
        self.resetAt = resetAt
        self.startsLeft = startsLeft ?? remaining
        self.limit = limit
    }

    /// After a reset, the window's quota has started and no answer has said more yet.
    public var awaitsAnswer: Bool { !resetAt.isFinite && startsLeft <= 0 }
}

/// What requests are grouped by: scheme, host and port.
public struct HostKey: Hashable, Sendable, CustomStringConvertible {
    public let scheme: String
    public let name: String
    public let port: Int

    public init(scheme: String, name: String, port: Int) {
        self.scheme = scheme.lowercased()
        self.name = name.lowercased()
        self.port = port
        nameAndPort = "\(self.name):\(port)"
        var hasher = Hasher()
        hasher.combine(self.name)
        hasher.combine(port)
        hasher.combine(self.scheme)
        hash = hasher.finalize()
    }

    public init(_ url: RequestURL) {
        self.init(scheme: url.scheme, name: url.host, port: url.port)
    }

    public static func == (lhs: HostKey, rhs: HostKey) -> Bool {
        lhs.port == rhs.port && lhs.name == rhs.name && lhs.scheme == rhs.scheme
    }

    /// The fields' hash, made once: a key is looked up several times per request (its
    /// limit, its state, its end), and hashing two strings each time showed in callgrind.
    private let hash: Int

    public func hash(into hasher: inout Hasher) {
        hasher.combine(hash)
    }

    /// `name:port`, made once: limits are looked up by it.
    public let nameAndPort: String
    public var description: String { "\(scheme)://\(name):\(port)" }
}
