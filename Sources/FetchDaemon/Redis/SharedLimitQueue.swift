import FetchEngine

/// The bookkeeping of shared limits in one daemon, pure: time is an argument of every call
/// and the answers are actions for `SharedAdmission` to perform (a round trip to Redis, a
/// waiter to release, a lease to give back), so tests drive it with a moved clock.
///
/// Per host, requests wait in priority order. One at a time asks Redis for a place (the
/// admit script: a GCRA reservation and, with maxConcurrent, a lease): Redis answers with the
/// delay after which it may start, so a request costs one round trip however long it waits.
/// A daemon holds reservations at most `maxAhead` into the future, so a request that is
/// cancelled or paused wastes little of the shared budget. Refused (paused, or every shared
/// slot leased), the host waits for the pub/sub message that a pause began or a slot came
/// free, or for the time Redis named (a pause's end, the earliest lease's expiry).
///
/// While Redis is down, a host whose limit says `onRedisDown: local` hands its waiting
/// requests to the local fallback (`localShare` x the limit); `wait` keeps them here until
/// Redis is back. When it is back, requests still waiting in the fallback come back here.
struct SharedLimitQueue: Sendable {
    typealias Ticket = HostScheduler.Ticket

    /// How long a slot's lease lasts in Redis without renewal: a daemon that dies frees its
    /// slots within this time.
    static let leaseSeconds = 5.0
    /// How often running leases are renewed.
    static let renewSeconds = leaseSeconds / 3

    enum Action: Sendable, Equatable {
        /// Run the admit script for this ticket with this lease id.
        case ask(Ticket, lease: String)
        /// The ticket may start now.
        case admit(UInt64)
        /// Give a lease back in Redis.
        case release(HostKey, lease: String)
        /// Renew these running leases.
        case renew(HostKey, leases: [String])
        /// Queue the ticket in the local fallback.
        case toFallback(Ticket)
        /// Take the ticket back from the local fallback, if it is still waiting there.
        case fromFallback(Ticket)
        /// A request the fallback admitted ended.
        case fallbackFinished(HostKey)
        /// No start in the fallback before this time: the reservations Redis granted run
        /// until then, and the local share begins after them.
        case holdFallback(HostKey, until: Double)
    }

    enum Refusal: Sendable, Equatable {
        case paused(seconds: Double)
        case full(seconds: Double)
    }

    struct Reservation: Sendable, Equatable {
        var ticket: Ticket
        var due: Double
        var lease: String
    }

    struct Host: Sendable, Equatable {
        var waiting: [Ticket] = []
        var asking: Ticket?
        var askingLease = ""
        var askingCancelled = false
        var askingWakes: UInt64 = 0
        var reserved: [Reservation] = []
        var running = 0
        var pausedUntil: Double?
        /// Refused for want of a slot: ask again on a `free` message, or at this time.
        var slotWaitUntil: Double?
        var lastDue = -Double.infinity
        var wakes: UInt64 = 0
        /// Tickets that gave a late reservation back once: the next one starts however late.
        var askedAgain: Set<UInt64> = []

        var isIdle: Bool {
            waiting.isEmpty && asking == nil && reserved.isEmpty && running == 0 && pausedUntil == nil
        }

        /// Higher priority first, first come first served among equals. A ticket that goes
        /// back (its question failed, its reservation was given back) goes before the later
        /// ones of its priority (tickets are numbered in the order jobs came).
        mutating func insert(_ ticket: Ticket, atFrontOfItsPriority: Bool = false) {
            var index = waiting.endIndex
            if atFrontOfItsPriority {
                index = waiting.firstIndex {
                    $0.priority < ticket.priority || ($0.priority == ticket.priority && $0.id > ticket.id)
                } ?? waiting.endIndex
            } else {
                while index > waiting.startIndex, waiting[index - 1].priority < ticket.priority { index -= 1 }
            }
            waiting.insert(ticket, at: index)
        }
    }

    let daemonID: String
    private(set) var redisUp: Bool
    private(set) var hosts: [HostKey: Host] = [:]
    /// Requests running on a Redis lease: ticket id -> (host, lease).
    private(set) var leases: [UInt64: (host: HostKey, lease: String)] = [:]
    private(set) var fallbackWaiting: [UInt64: Ticket] = [:]
    private(set) var fallbackRunning: [UInt64: HostKey] = [:]
    /// The usual time from a question to its answer (smoothed as TCP smooths its round trip,
    /// 1/8 of each new one): a reservation due sooner than that is late by the trip itself,
    /// which asking again cannot save.
    private(set) var roundTrip = 0.0
    private(set) var renewDue: Double?
    private var leaseCounter: UInt64 = 0

    init(daemonID: String, redisUp: Bool) {
        self.daemonID = daemonID
        self.redisUp = redisUp
    }

    /// How far ahead of now a daemon holds reservations: two intervals and 50 ms.
    static func maxAhead(_ limit: HostScheduler.Limit) -> Double {
        guard let rps = limit.requestsPerSecond, rps > 0 else { return 0 }
        return 2 / rps + 0.05
    }

    // MARK: requests

    mutating func enqueue(_ ticket: Ticket, limit: HostScheduler.Limit, now: Double) -> [Action] {
        if !redisUp, limit.onRedisDown == .local {
            fallbackWaiting[ticket.id] = ticket
            return [.toFallback(ticket)]
        }
        hosts[ticket.host, default: Host()].insert(ticket)
        return pump(ticket.host, limit: limit, now: now)
    }

    /// Where a cancelled ticket was.
    enum Cancelled: Equatable {
        /// Not here (already admitted, or unknown).
        case notFound
        /// Taken out; its waiter gets the error now.
        case removed([Action])
        /// Waiting in the fallback: cancel it there (its waiter hears from the fallback).
        case inFallback
    }

    mutating func cancel(_ ticket: Ticket) -> Cancelled {
        if fallbackWaiting[ticket.id] != nil { return .inFallback }
        guard var host = hosts[ticket.host] else { return .notFound }
        defer { hosts[ticket.host] = host; forgetIfIdle(ticket.host) }
        if let index = host.waiting.firstIndex(where: { $0.id == ticket.id }) {
            host.waiting.remove(at: index)
            return .removed([])
        }
        if host.asking?.id == ticket.id, !host.askingCancelled {
            host.askingCancelled = true
            return .removed([])
        }
        if let index = host.reserved.firstIndex(where: { $0.ticket.id == ticket.id }) {
            let lease = host.reserved.remove(at: index).lease
            return .removed([.release(ticket.host, lease: lease)])
        }
        return .notFound
    }

    /// A request that was admitted here (or by the fallback) ended; nil when it was not ours.
    mutating func finished(ticketID: UInt64) -> [Action]? {
        if let (host, lease) = leases.removeValue(forKey: ticketID) {
            hosts[host]?.running -= 1
            forgetIfIdle(host)
            if leases.isEmpty { renewDue = nil }
            return [.release(host, lease: lease)]
        }
        if let host = fallbackRunning.removeValue(forKey: ticketID) { return [.fallbackFinished(host)] }
        return nil
    }

    // MARK: answers from Redis

    /// Redis reserved a place: the asking ticket may start `delay` seconds after Redis ran the
    /// script. That moment is taken as `askedAt` (when the question was sent: at most the
    /// one-way trip to Redis early), not as `now` (the answer's arrival, which a busy daemon
    /// may take long to read): a reply that was slow to come shows as a late start.
    mutating func granted(_ host: HostKey, delay: Double, askedAt: Double? = nil, limit: HostScheduler.Limit,
                          now: Double) -> [Action] {
        guard var state = hosts[host], let ticket = state.asking else { return [] }
        let lease = state.askingLease
        let cancelled = state.askingCancelled
        state.asking = nil
        state.askingCancelled = false
        var actions: [Action] = []
        if cancelled {
            actions.append(.release(host, lease: lease))
        } else {
            let due = (askedAt ?? now) + max(0, delay)
            state.reserved.append(Reservation(ticket: ticket, due: due, lease: lease))
            state.lastDue = max(state.lastDue, due)
        }
        hosts[host] = state
        actions += pump(host, limit: limit, now: now)
        // Learnt after this answer's start was judged: a slow answer does not excuse itself.
        if let askedAt, now >= askedAt {
            roundTrip = roundTrip == 0 ? now - askedAt : roundTrip + (now - askedAt - roundTrip) / 8
        }
        return actions
    }

    /// Redis refused the asking ticket: the host is paused, or every shared slot is leased.
    mutating func refused(_ host: HostKey, _ refusal: Refusal, limit: HostScheduler.Limit, now: Double) -> [Action] {
        guard var state = hosts[host], let ticket = state.asking else { return [] }
        state.asking = nil
        if !state.askingCancelled { state.insert(ticket, atFrontOfItsPriority: true) }
        state.askingCancelled = false
        switch refusal {
        case .paused(let seconds):
            hosts[host] = state
            return paused(host, seconds: seconds, now: now)
        case .full(let seconds):
            // A slot that came free while the question was on its way: ask again at once.
            state.slotWaitUntil = state.wakes == state.askingWakes ? now + max(0, seconds) : nil
        }
        hosts[host] = state
        forgetIfIdle(host)
        return pump(host, limit: limit, now: now)
    }

    /// The question never got an answer (Redis went down): the ticket waits again, here or
    /// in the fallback.
    mutating func unanswered(_ host: HostKey, limit: HostScheduler.Limit, now: Double) -> [Action] {
        guard var state = hosts[host], let ticket = state.asking else { return [] }
        let cancelled = state.askingCancelled
        state.asking = nil
        state.askingCancelled = false
        hosts[host] = state
        guard !cancelled else { forgetIfIdle(host); return [] }
        if !redisUp, limit.onRedisDown == .local {
            fallbackWaiting[ticket.id] = ticket
            forgetIfIdle(host)
            return [.toFallback(ticket)]
        }
        hosts[host]?.insert(ticket, atFrontOfItsPriority: true)
        return pump(host, limit: limit, now: now)
    }

    // MARK: messages

    /// A `free` message: a slot of the host came free somewhere.
    mutating func slotFreed(_ host: HostKey, limit: HostScheduler.Limit, now: Double) -> [Action] {
        guard hosts[host] != nil else { return [] }
        hosts[host]?.wakes += 1
        hosts[host]?.slotWaitUntil = nil
        return pump(host, limit: limit, now: now)
    }

    /// A `pause` message (or this daemon's own Retry-After): no start until now + seconds.
    /// Reservations not yet due give their place back and ask again after the pause.
    mutating func paused(_ host: HostKey, seconds: Double, now: Double) -> [Action] {
        var state = hosts[host] ?? Host()
        state.pausedUntil = max(state.pausedUntil ?? now, now + seconds)
        var actions: [Action] = []
        for reservation in state.reserved.reversed() {
            state.insert(reservation.ticket, atFrontOfItsPriority: true)
            actions.append(.release(host, lease: reservation.lease))
        }
        state.reserved = []
        state.lastDue = -Double.infinity
        hosts[host] = state
        return actions
    }

    /// The subscription was (re)made: messages may have been missed, so every host that
    /// waits for a message asks again.
    mutating func resubscribed(limit: (HostKey) -> HostScheduler.Limit, now: Double) -> [Action] {
        var actions: [Action] = []
        for host in Array(hosts.keys) {
            hosts[host]?.wakes += 1
            hosts[host]?.slotWaitUntil = nil
            actions += pump(host, limit: limit(host), now: now)
        }
        return actions
    }

    // MARK: Redis up and down

    mutating func redisWentDown(limit: (HostKey) -> HostScheduler.Limit, now: Double) -> [Action] {
        guard redisUp else { return [] }
        redisUp = false
        var actions: [Action] = []
        for host in Array(hosts.keys) {
            guard var state = hosts[host] else { continue }
            state.slotWaitUntil = nil
            if limit(host).onRedisDown == .local {
                // The local share's first start comes one of its intervals after the last
                // start Redis granted, not on top of it.
                let part = limit(host).localPart
                let after = part.requestsPerSecond.map { state.lastDue + 1 / $0 } ?? state.lastDue
                if after > now { actions.append(.holdFallback(host, until: after)) }
                for ticket in state.waiting {
                    fallbackWaiting[ticket.id] = ticket
                    actions.append(.toFallback(ticket))
                }
                state.waiting = []
            }
            hosts[host] = state
            forgetIfIdle(host)
        }
        return actions
    }

    mutating func redisCameBack(limit: (HostKey) -> HostScheduler.Limit, now: Double) -> [Action] {
        guard !redisUp else { return [] }
        redisUp = true
        var actions: [Action] = fallbackWaiting.values.sorted { $0.id < $1.id }.map { .fromFallback($0) }
        var byHost: [HostKey: [String]] = [:]
        for (host, lease) in leases.values { byHost[host, default: []].append(lease) }
        for (host, held) in byHost { actions.append(.renew(host, leases: held.sorted())) }
        if !leases.isEmpty { renewDue = now + Self.renewSeconds }
        for host in Array(hosts.keys) { actions += pump(host, limit: limit(host), now: now) }
        return actions
    }

    /// The fallback gave a waiting ticket back (`fromFallback` succeeded): it waits here.
    mutating func returnedFromFallback(_ ticket: Ticket, limit: HostScheduler.Limit, now: Double) -> [Action] {
        guard fallbackWaiting.removeValue(forKey: ticket.id) != nil else { return [] }
        if !redisUp, limit.onRedisDown == .local {  // down again already
            fallbackWaiting[ticket.id] = ticket
            return [.toFallback(ticket)]
        }
        hosts[ticket.host, default: Host()].insert(ticket, atFrontOfItsPriority: true)
        return pump(ticket.host, limit: limit, now: now)
    }

    /// The fallback admitted a ticket: it runs on the local share, without a lease.
    mutating func fallbackAdmitted(_ ticket: Ticket) -> Bool {
        guard fallbackWaiting.removeValue(forKey: ticket.id) != nil else { return false }
        fallbackRunning[ticket.id] = ticket.host
        return true
    }

    /// A ticket the fallback was holding ended there (cancelled).
    mutating func fallbackDropped(_ ticketID: UInt64) {
        fallbackWaiting[ticketID] = nil
    }

    // MARK: time

    /// Starts what is due, ends pauses and slot waits that are over, renews leases.
    mutating func tick(limit: (HostKey) -> HostScheduler.Limit, now: Double) -> [Action] {
        var actions: [Action] = []
        for host in Array(hosts.keys) {
            if let until = hosts[host]?.pausedUntil, until <= now { hosts[host]?.pausedUntil = nil }
            if let until = hosts[host]?.slotWaitUntil, until <= now { hosts[host]?.slotWaitUntil = nil }
            actions += pump(host, limit: limit(host), now: now)
        }
        if let due = renewDue, due <= now, redisUp {
            var byHost: [HostKey: [String]] = [:]
            for (host, lease) in leases.values { byHost[host, default: []].append(lease) }
            for (host, held) in byHost.sorted(by: { $0.key.description < $1.key.description }) {
                actions.append(.renew(host, leases: held.sorted()))
            }
            renewDue = leases.isEmpty ? nil : now + Self.renewSeconds
        }
        return actions
    }

    /// When `tick` should next run (nil: nothing waits on time).
    func nextWakeup(limit: (HostKey) -> HostScheduler.Limit) -> Double? {
        var earliest = redisUp ? renewDue : nil
        func consider(_ t: Double?) { if let t { earliest = min(earliest ?? t, t) } }
        for (host, state) in hosts {
            consider(state.reserved.map(\.due).min())
            consider(state.pausedUntil)  // also to forget the host once its pause is over
            guard redisUp, !state.waiting.isEmpty, state.asking == nil else { continue }
            consider(state.slotWaitUntil)
            if state.pausedUntil == nil, state.slotWaitUntil == nil, state.lastDue > -Double.infinity {
                consider(state.lastDue - Self.maxAhead(limit(host)))
            }
        }
        return earliest
    }

    // MARK: the one place that decides

    private mutating func pump(_ host: HostKey, limit: HostScheduler.Limit, now: Double) -> [Action] {
        guard var state = hosts[host] else { return [] }
        var actions: [Action] = []
        if let until = state.pausedUntil, until <= now { state.pausedUntil = nil }
        // Reservations that are due start. One that comes more than half an interval late
        // (the daemon was held up) gives its place back and asks again: started now, it would
        // come too close to the next daemon's starts, which Redis scheduled on time. Twice the
        // usual round trip is allowed on top: a reservation for "now" is always late by the
        // trip of its answer, and asking again would cost another trip and come as late.
        let lateness = limit.requestsPerSecond.map { 0.5 / $0 + 2 * roundTrip } ?? Double.infinity
        while let first = state.reserved.first, first.due <= now + 1e-9 {
            state.reserved.removeFirst()
            if now - first.due > lateness, redisUp, state.askedAgain.insert(first.ticket.id).inserted {
                state.insert(first.ticket, atFrontOfItsPriority: true)
                actions.append(.release(host, lease: first.lease))
                continue
            }
            state.askedAgain.remove(first.ticket.id)
            leases[first.ticket.id] = (host, first.lease)
            state.running += 1
            if renewDue == nil { renewDue = now + Self.renewSeconds }
            actions.append(.admit(first.ticket.id))
        }
        if redisUp, state.asking == nil, state.pausedUntil == nil, state.slotWaitUntil == nil,
           !state.waiting.isEmpty, state.lastDue - now <= Self.maxAhead(limit) {
            let ticket = state.waiting.removeFirst()
            leaseCounter &+= 1
            state.asking = ticket
            state.askingLease = "\(daemonID):\(leaseCounter)"
            state.askingWakes = state.wakes
            actions.append(.ask(ticket, lease: state.askingLease))
        }
        hosts[host] = state
        forgetIfIdle(host)
        return actions
    }

    private mutating func forgetIfIdle(_ host: HostKey) {
        if let state = hosts[host], state.isIdle { hosts[host] = nil }
    }

    /// Counts for getRateLimits: this daemon's part of each shared host.
    func counts() -> [HostKey: (running: Int, queued: Int, pausedUntil: Double?)] {
        var out: [HostKey: (running: Int, queued: Int, pausedUntil: Double?)] = [:]
        for (host, state) in hosts {
            out[host] = (state.running, state.waiting.count + state.reserved.count + (state.asking == nil ? 0 : 1), state.pausedUntil)
        }
        for (_, host) in fallbackRunning { out[host, default: (0, 0, nil)].running += 1 }
        for (_, ticket) in fallbackWaiting { out[ticket.host, default: (0, 0, nil)].queued += 1 }
        return out
    }
}
