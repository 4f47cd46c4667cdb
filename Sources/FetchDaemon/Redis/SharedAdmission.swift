import Dispatch
import FetchEngine
import Glibc

/// Admits requests to hosts whose limit is `shared` (docs/rate-limits.md, "Across machines"):
/// drives a `SharedLimitQueue` with the real clock, runs its round trips on the `RedisLink`,
/// and hands requests to a local fallback (`localShare` x the limit) while Redis is down for
/// limits that say `onRedisDown: local`. Nothing here runs on the engine thread for long: a
/// request is queued and the round trip happens on the link's thread.
final class SharedAdmission: Sendable {
    typealias Admitted = HostAdmission.Admitted

    private struct State {
        var queue: SharedLimitQueue
        var waiters: [UInt64: Admitted] = [:]
        var timerDeadline: Double?
        /// Host keys by their text, for messages.
        var known: [String: HostKey] = [:]
    }

    /// Tells a fallback waiter that it went back to the shared queue (its waiter is kept).
    private struct MovedBack: Error {}

    private let state: Locked<State>
    private let limits: HostAdmission
    /// The local share of shared limits while Redis is down.
    let fallback: HostAdmission
    private let linkBox = Locked<RedisLink?>(nil)
    private nonisolated(unsafe) let timer: any DispatchSourceTimer
    private let log: Logger

    /// `limits` is the daemon's admission: its table says which hosts are shared, and its
    /// clock is the one used here.
    init(url: RedisURL, limits: HostAdmission, log: Logger) {
        // Names this daemon's leases in Redis: unique per process, on any machine.
        let daemonID = String(UInt64.random(in: 0...UInt64.max), radix: 36) + "-\(getpid())"
        state = Locked(State(queue: SharedLimitQueue(daemonID: daemonID, redisUp: false)))
        self.limits = limits
        self.log = log
        fallback = HostAdmission(scheduler: HostScheduler(defaultLimit: HostScheduler.Limit(maxConcurrent: nil)))
        timer = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "fetchd.shared-admission"))
        timer.schedule(deadline: .distantFuture)
        timer.setEventHandler { [weak self] in self?.tick() }
        timer.resume()
        let link = RedisLink(
            url: url, channel: SharedLimitScripts.channel, log: log,
            stateChanged: { [weak self] up in self?.redisChanged(up: up) },
            subscribed: { [weak self] in self?.resubscribed() },
            message: { [weak self] text in self?.message(text) })
        linkBox.withLock { $0 = link }
        if link.isUp { redisChanged(up: true) }
    }

    deinit { timer.cancel() }

    private var link: RedisLink? { linkBox.withLock { $0 } }
    private var now: Double { limits.now }

    /// "up" or "down", for getStatus.
    var redisUp: Bool { state.withLock { $0.queue.redisUp } }

    // MARK: requests

    func enqueue(_ ticket: HostScheduler.Ticket, limit: HostScheduler.Limit, admitted: @escaping Admitted) {
        let actions = state.withLock { s -> [SharedLimitQueue.Action] in
            s.waiters[ticket.id] = admitted
            s.known[ticket.host.description] = ticket.host
            return s.queue.enqueue(ticket, limit: limit, now: now)
        }
        perform(actions)
    }

    @discardableResult
    func cancel(_ ticket: HostScheduler.Ticket, error: any Error) -> Bool {
        let (where_, waiter) = state.withLock { s -> (SharedLimitQueue.Cancelled, Admitted?) in
            let found = s.queue.cancel(ticket)
            if case .removed = found { return (found, s.waiters.removeValue(forKey: ticket.id)) }
            return (found, nil)
        }
        switch where_ {
        case .notFound: return false
        case .inFallback: return fallback.cancel(ticket, error: error)
        case .removed(let actions):
            perform(actions)
            waiter?(.failure(error))
            return true
        }
    }

    /// A request ended; false when it was not admitted here.
    func finished(_ ticket: HostScheduler.Ticket) -> Bool {
        guard let actions = state.withLock({ $0.queue.finished(ticketID: ticket.id) }) else { return false }
        perform(actions)
        return true
    }

    /// A 429 or 503 with Retry-After: the host pauses here at once, in the fallback, and for
    /// every daemon through Redis.
    func pause(_ host: HostKey, seconds: Double) {
        let actions = state.withLock { s -> [SharedLimitQueue.Action] in
            s.known[host.description] = host
            return s.queue.paused(host, seconds: seconds, now: now)
        }
        perform(actions)
        fallback.pause(host, seconds: seconds)
        link?.eval(SharedLimitScripts.pause, keys: [SharedLimitScripts.keys(host).pause],
                   arguments: [String(Int(seconds * 1e6)), SharedLimitScripts.channel, host.description]) { _ in }
    }

    /// This daemon's requests to the host running on a Redis lease now.
    func running(_ host: HostKey) -> Int {
        state.withLock { $0.queue.hosts[host]?.running ?? 0 }
    }

    /// This daemon's part of each shared host, for getRateLimits.
    func counts() -> (hosts: [HostKey: (running: Int, queued: Int, pausedUntil: Double?)], now: Double) {
        let now = self.now
        return (state.withLock { $0.queue.counts() }, now)
    }

    // MARK: events

    private func limit(_ host: HostKey) -> HostScheduler.Limit { limits.limit(for: host) }

    private func redisChanged(up: Bool) {
        let actions = state.withLock { s -> [SharedLimitQueue.Action] in
            up ? s.queue.redisCameBack(limit: limit, now: now) : s.queue.redisWentDown(limit: limit, now: now)
        }
        perform(actions)
    }

    private func resubscribed() {
        perform(state.withLock { $0.queue.resubscribed(limit: limit, now: now) })
    }

    private func message(_ text: String) {
        let words = text.split(separator: " ")
        guard words.count >= 2 else { return }
        let actions = state.withLock { s -> [SharedLimitQueue.Action] in
            guard let host = s.known[String(words[1])] ?? Self.hostKey(words[1]) else { return [] }
            s.known[host.description] = host
            switch words[0] {
            case "free": return s.queue.slotFreed(host, limit: limit(host), now: now)
            case "pause":
                guard words.count == 3, let us = Double(words[2]) else { return [] }
                return s.queue.paused(host, seconds: us / 1e6, now: now)
            default: return []
            }
        }
        if words[0] == "pause", words.count == 3, let us = Double(words[2]), let host = Self.hostKey(words[1]) {
            fallback.pause(host, seconds: us / 1e6)
        }
        perform(actions)
    }

    /// A host key from its text in a message (`scheme://name:port`).
    private static func hostKey(_ text: Substring) -> HostKey? {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)  // scheme: "" name:port
        guard parts.count == 3, parts[0].hasSuffix(":"), parts[1].isEmpty, let colon = parts[2].lastIndex(of: ":"),
              let port = Int(parts[2][parts[2].index(after: colon)...]) else { return nil }
        return HostKey(scheme: String(parts[0].dropLast()), name: String(parts[2][..<colon]), port: port)
    }

    private func tick() {
        perform(state.withLock { $0.queue.tick(limit: limit, now: now) })
    }

    // MARK: performing what the queue decided

    private func perform(_ actions: [SharedLimitQueue.Action]) {
        for action in actions {
            switch action {
            case .ask(let ticket, let lease):
                ask(ticket, lease: lease)
            case .admit(let id):
                let waiter = state.withLock { $0.waiters.removeValue(forKey: id) }
                waiter?(.success(()))
            case .release(let host, let lease):
                let cap = limit(host).maxConcurrent ?? 0
                guard cap > 0 else { continue }
                link?.eval(SharedLimitScripts.release, keys: [SharedLimitScripts.keys(host).leases],
                           arguments: [String(cap), lease, SharedLimitScripts.channel, host.description]) { _ in }
            case .renew(let host, let leases):
                link?.eval(SharedLimitScripts.renew, keys: [SharedLimitScripts.keys(host).leases],
                           arguments: [String(Int(SharedLimitQueue.leaseSeconds * 1e6))] + leases) { _ in }
            case .toFallback(let ticket):
                toFallback(ticket)
            case .fromFallback(let ticket):
                if fallback.cancel(ticket, error: MovedBack()) {
                    perform(state.withLock { $0.queue.returnedFromFallback(ticket, limit: limit(ticket.host), now: now) })
                }
            case .fallbackFinished(let host):
                fallback.finished(host)
            case .holdFallback(let host, let until):
                fallback.pause(host, seconds: until - now)
            }
        }
        reschedule()
    }

    private func ask(_ ticket: HostScheduler.Ticket, lease: String) {
        let limit = self.limit(ticket.host)
        let keys = SharedLimitScripts.keys(ticket.host)
        guard let link else { return }
        let askedAt = now
        link.eval(SharedLimitScripts.admit, keys: [keys.tat, keys.leases, keys.pause],
                  arguments: [String(limit.requestsPerSecond ?? 0), String(limit.burst), String(limit.maxConcurrent ?? 0),
                              String(Int(SharedLimitQueue.leaseSeconds * 1e6)), lease, String(ticket.cost)]) { [self] result in
            let host = ticket.host
            let actions = state.withLock { s -> [SharedLimitQueue.Action] in
                let now = self.now
                switch result {
                case .success(let reply):
                    guard let parts = reply.array, let first = parts.first?.integer else {
                        log.error("redis: admit script answered \(reply); counted as not answered")
                        return s.queue.unanswered(host, limit: limit, now: now)
                    }
                    if first == 1, parts.count >= 2, let delay = parts[1].integer {
                        return s.queue.granted(host, delay: Double(delay) / 1e6, askedAt: askedAt, limit: limit, now: now)
                    }
                    let wait = Double(parts.count >= 3 ? parts[2].integer ?? 0 : 0) / 1e6
                    let refusal: SharedLimitQueue.Refusal = parts.count >= 2 && parts[1].text == "paused"
                        ? .paused(seconds: wait) : .full(seconds: wait)
                    return s.queue.refused(host, refusal, limit: limit, now: now)
                case .failure:
                    return s.queue.unanswered(host, limit: limit, now: now)
                }
            }
            perform(actions)
        }
    }

    private func toFallback(_ ticket: HostScheduler.Ticket) {
        fallback.setLimit(limit(ticket.host).localPart, for: ticket.host.nameAndPort)
        let admitted: Admitted = { [weak self] result in
            guard let self else { return }
            if case .failure(let error) = result, error is MovedBack { return }
            let waiter = state.withLock { s -> Admitted? in
                if case .success = result {
                    _ = s.queue.fallbackAdmitted(ticket)
                } else {
                    s.queue.fallbackDropped(ticket.id)
                }
                return s.waiters.removeValue(forKey: ticket.id)
            }
            waiter?(result)
        }
        if fallback.startNow(ticket) {
            admitted(.success(()))
            return
        }
        do {
            try fallback.enqueue(ticket, alreadyAccepted: true, admitted: admitted)
        } catch {
            admitted(.failure(error))
        }
    }

    private func reschedule() {
        state.withLock { s in
            let next = s.queue.nextWakeup(limit: limit)
            guard next != s.timerDeadline else { return }
            s.timerDeadline = next
            if let next {
                timer.schedule(deadline: DispatchTime(uptimeNanoseconds: limits.uptimeNanoseconds(at: next)), leeway: .nanoseconds(0))
            } else {
                timer.schedule(deadline: .distantFuture)
            }
        }
    }
}
