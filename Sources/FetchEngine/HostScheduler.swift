/// Decides when each request may start, per host: at most `maxConcurrent` at once, and a
/// token bucket (GCRA) of `requestsPerSecond` with `burst`, so that in any window of T
/// seconds at most burst + rps x T requests start. Waiting requests start by priority
/// (higher first), first come first served among equals. A host can be paused (a 429 or
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

        public init(maxConcurrent: Int? = 10, requestsPerSecond: Double? = nil, burst: Int = 1) {
            self.maxConcurrent = maxConcurrent
            self.requestsPerSecond = requestsPerSecond
            self.burst = max(1, burst)
        }
    }

    public struct Ticket: Sendable, Equatable {
        public let id: UInt64
        public let host: HostKey
        public let priority: Int
        public init(id: UInt64, host: HostKey, priority: Int) {
            self.id = id
            self.host = host
            self.priority = priority
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
        fileprivate var sequence: [UInt64: UInt64] = [:]
    }

    public private(set) var limits: [String: Limit]
    public private(set) var hosts: [HostKey: HostState] = [:]
    public let maxQueued: Int
    private var queuedCount = 0
    private var nextSequence: UInt64 = 0

    public static let defaultMaxQueued = 10_000

    public init(defaultLimit: Limit = Limit(), maxQueued: Int = HostScheduler.defaultMaxQueued) {
        limits = ["*": defaultLimit]
        self.maxQueued = maxQueued
    }

    // MARK: limits

    /// The limit for a host: its `name:port` entry, else its `name` entry, else `*`.
    public func limit(for host: HostKey) -> Limit {
        limits[host.nameAndPort] ?? limits[host.name] ?? limits["*"] ?? Limit()
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

    /// Adds a request to its host's queue; past `maxQueued` waiting requests it is refused
    /// and nothing already queued is dropped.
    public mutating func enqueue(_ ticket: Ticket) throws(Overloaded) {
        guard queuedCount < maxQueued else { throw Overloaded(limit: maxQueued) }
        var state = hosts[ticket.host] ?? HostState()
        state.sequence[ticket.id] = nextSequence
        nextSequence += 1
        // Higher priority first; equal priority keeps arrival order.
        let index = state.waiting.firstIndex { $0.priority < ticket.priority } ?? state.waiting.endIndex
        state.waiting.insert(ticket, at: index)
        hosts[ticket.host] = state
        queuedCount += 1
    }

    /// Removes a waiting request. False when it was not waiting (already admitted or unknown).
    @discardableResult
    public mutating func cancel(ticketID: UInt64, host: HostKey) -> Bool {
        guard var state = hosts[host], let index = state.waiting.firstIndex(where: { $0.id == ticketID }) else { return false }
        state.waiting.remove(at: index)
        state.sequence[ticketID] = nil
        queuedCount -= 1
        store(state, for: host)
        return true
    }

    /// The requests that may start now, in the order they should start. Each is counted as
    /// running until `finished`.
    public mutating func admit(now: Double) -> [Ticket] {
        var started: [Ticket] = []
        for host in Array(hosts.keys) {
            guard var state = hosts[host], !state.waiting.isEmpty else { continue }
            let limit = self.limit(for: host)
            while let first = state.waiting.first, canStart(state, limit: limit, now: now) {
                state.waiting.removeFirst()
                state.sequence[first.id] = nil
                queuedCount -= 1
                state.running += 1
                if let rps = limit.requestsPerSecond, rps > 0 {
                    state.theoreticalArrival = max(state.theoreticalArrival, now) + 1 / rps
                }
                started.append(first)
            }
            store(state, for: host)
        }
        return started
    }

    public mutating func finished(host: HostKey) {
        guard var state = hosts[host] else { return }
        state.running = max(0, state.running - 1)
        store(state, for: host)
    }

    /// No new starts for this host until `until` (a Retry-After), for every client.
    public mutating func pause(host: HostKey, until: Double) {
        var state = hosts[host] ?? HostState()
        state.pausedUntil = max(state.pausedUntil ?? until, until)
        hosts[host] = state
    }

    /// When `admit` should next be called to start a waiting request held back by a rate
    /// or a pause (nil when nothing waits on time: only on a running request to finish).
    public func nextWakeup(now: Double) -> Double? {
        var earliest: Double? = nil
        for (host, state) in hosts where !state.waiting.isEmpty {
            let limit = self.limit(for: host)
            if let cap = limit.maxConcurrent, state.running >= cap { continue }
            var at = now
            if let paused = state.pausedUntil, paused > now { at = max(at, paused) }
            if let rps = limit.requestsPerSecond, rps > 0 {
                at = max(at, state.theoreticalArrival - Double(limit.burst - 1) / rps)
            }
            earliest = min(earliest ?? at, at)
        }
        return earliest
    }

    private func canStart(_ state: HostState, limit: Limit, now: Double) -> Bool {
        if let cap = limit.maxConcurrent, state.running >= cap { return false }
        if let paused = state.pausedUntil, paused > now { return false }
        if let rps = limit.requestsPerSecond, rps > 0 {
            // GCRA: conforming while the bucket has room for one more of the burst. A tiny
            // tolerance keeps floating-point rounding from delaying an exact start.
            return now + 1e-9 >= state.theoreticalArrival - Double(limit.burst - 1) / rps
        }
        return true
    }

    /// Forgets hosts with nothing left to remember, so the table does not grow forever.
    private mutating func store(_ state: HostState, for host: HostKey) {
        let idle = state.running == 0 && state.waiting.isEmpty && state.pausedUntil == nil
        let bucketFull = state.theoreticalArrival == -Double.infinity
        hosts[host] = idle && bucketFull ? nil : state
    }

    /// Drops pauses that have ended and buckets that have refilled (call now and then).
    public mutating func expire(now: Double) {
        for (host, var state) in hosts {
            if let paused = state.pausedUntil, paused <= now { state.pausedUntil = nil }
            if state.theoreticalArrival <= now { state.theoreticalArrival = -Double.infinity }
            store(state, for: host)
        }
    }
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
    }

    public init(_ url: RequestURL) {
        self.init(scheme: url.scheme, name: url.host, port: url.port)
    }

    public var nameAndPort: String { "\(name):\(port)" }
    public var description: String { "\(scheme)://\(name):\(port)" }
}
