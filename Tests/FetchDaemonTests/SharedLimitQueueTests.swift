import FetchEngine
import XCTest

@testable import FetchDaemon

/// The bookkeeping of shared limits with a moved clock: one round trip per request, leases
/// taken, kept, renewed and given back, pauses, and the switch to the local fallback and back.
final class SharedLimitQueueTests: XCTestCase {
    typealias Q = SharedLimitQueue
    let host = HostKey(scheme: "http", name: "api.example", port: 80)

    func limit(rps: Double? = 20, cap: Int? = nil, mode: HostScheduler.Limit.RedisDownMode = .local) -> HostScheduler.Limit {
        var l = HostScheduler.Limit(maxConcurrent: cap, requestsPerSecond: rps, burst: 1)
        l.shared = true
        l.onRedisDown = mode
        return l
    }

    func ticket(_ id: UInt64, priority: Int = 0) -> HostScheduler.Ticket {
        .init(id: id, host: host, priority: priority)
    }

    func asks(_ actions: [Q.Action]) -> [UInt64] {
        actions.compactMap { if case .ask(let t, _) = $0 { return t.id }; return nil }
    }

    func admits(_ actions: [Q.Action]) -> [UInt64] {
        actions.compactMap { if case .admit(let id) = $0 { return id }; return nil }
    }

    func testOneQuestionAtATimeAndOneRoundTripPerRequest() {
        var q = Q(daemonID: "d", redisUp: true)
        let l = limit()
        XCTAssertEqual(asks(q.enqueue(ticket(1), limit: l, now: 0)), [1])
        XCTAssertEqual(asks(q.enqueue(ticket(2), limit: l, now: 0)), [], "one question in flight per host")
        // Granted at once: admitted, and the next one asks.
        var actions = q.granted(host, delay: 0, limit: l, now: 0.001)
        XCTAssertEqual(admits(actions), [1])
        XCTAssertEqual(asks(actions), [2])
        // Granted for 50 ms later: not admitted until then, no further round trip for it.
        actions = q.granted(host, delay: 0.05, limit: l, now: 0.002)
        XCTAssertEqual(admits(actions), [])
        XCTAssertEqual(q.nextWakeup(limit: { _ in l }) ?? -1, 0.052, accuracy: 1e-9)
        XCTAssertEqual(admits(q.tick(limit: { _ in l }, now: 0.052)), [2])
    }

    func testReservationsStayWithinMaxAhead() {
        var q = Q(daemonID: "d", redisUp: true)
        let l = limit(rps: 20)  // maxAhead = 2/20 + 0.05 = 0.15 s
        for id in 1...6 { _ = q.enqueue(ticket(UInt64(id)), limit: l, now: 0) }
        var asked = 0
        var delay = 0.0
        var actions: [Q.Action] = []
        repeat {
            asked += 1
            actions = q.granted(host, delay: delay, limit: l, now: 0)
            delay += 0.05
        } while !asks(actions).isEmpty
        XCTAssertEqual(asked, 5, "reservations at 0, 0.05, 0.1, 0.15 and 0.2 s; the sixth waits")
        XCTAssertEqual(q.nextWakeup(limit: { _ in l }) ?? -1, 0.05, accuracy: 1e-9)
        // When the last reservation is within maxAhead again, the next request asks.
        let later = q.tick(limit: { _ in l }, now: 0.06)
        XCTAssertEqual(admits(later), [2])
        XCTAssertEqual(asks(later), [6])
    }

    func testALateReservationAsksAgainOnce() {
        var q = Q(daemonID: "d", redisUp: true)
        let l = limit(rps: 20)
        _ = q.enqueue(ticket(1), limit: l, now: 0)
        _ = q.granted(host, delay: 0.05, limit: l, now: 0)
        // Due at 0.05, the timer comes at 0.09: more than half an interval late.
        var late = q.tick(limit: { _ in l }, now: 0.09)
        XCTAssertEqual(admits(late), [])
        XCTAssertEqual(asks(late), [1])
        _ = q.granted(host, delay: 0.05, limit: l, now: 0.09)
        late = q.tick(limit: { _ in l }, now: 0.2)
        XCTAssertEqual(admits(late), [1], "the second time it starts however late")
    }

    func testAnAnswerForNowIsNotLateByItsOwnRoundTrip() {
        var q = Q(daemonID: "d", redisUp: true)
        let l = limit(rps: 1_000_000)  // half an interval: 0.5 us
        for id in 1...3 { _ = q.enqueue(ticket(UInt64(id)), limit: l, now: 0) }
        // The first answer ("now", 100 us after its question) has no round trip to go by: late.
        var actions = q.granted(host, delay: 0, askedAt: 0, limit: l, now: 0.0001)
        XCTAssertEqual(admits(actions), [])
        XCTAssertEqual(asks(actions), [1])
        XCTAssertEqual(q.roundTrip, 0.0001, accuracy: 1e-9)
        actions = q.granted(host, delay: 0, askedAt: 0.0001, limit: l, now: 0.0002)
        XCTAssertEqual(admits(actions), [1])
        XCTAssertEqual(asks(actions), [2])
        // From then on an answer for "now" that took the usual trip starts: one trip per request.
        actions = q.granted(host, delay: 0, askedAt: 0.0002, limit: l, now: 0.0003)
        XCTAssertEqual(admits(actions), [2])
        XCTAssertEqual(asks(actions), [3])
        // An answer read 10 ms late (the daemon held up) is still a late start.
        actions = q.granted(host, delay: 0, askedAt: 0.0003, limit: l, now: 0.0103)
        XCTAssertEqual(admits(actions), [])
        XCTAssertEqual(asks(actions), [3])
    }

    func testASlowAnswerCountsFromTheQuestion() {
        var q = Q(daemonID: "d", redisUp: true)
        let l = limit(rps: 20)
        _ = q.enqueue(ticket(1), limit: l, now: 0)
        // Asked at 0, due 0.05 after it; the answer was read only at 0.04.
        XCTAssertEqual(q.granted(host, delay: 0.05, askedAt: 0, limit: l, now: 0.04), [])
        XCTAssertEqual(q.nextWakeup(limit: { _ in l }) ?? -1, 0.05, accuracy: 1e-9)
    }

    func testLeasesAreKeptRenewedAndGivenBack() {
        var q = Q(daemonID: "d", redisUp: true)
        let l = limit(rps: nil, cap: 2)
        let lease: String
        if case .ask(_, let name)? = q.enqueue(ticket(1), limit: l, now: 0).first { lease = name } else { return XCTFail("no ask") }
        XCTAssertEqual(admits(q.granted(host, delay: 0, limit: l, now: 0)), [1])
        XCTAssertEqual(q.leases.count, 1)
        XCTAssertEqual(q.renewDue, Q.renewSeconds)
        let renew = q.tick(limit: { _ in l }, now: Q.renewSeconds)
        XCTAssertEqual(renew, [.renew(host, leases: [lease])])
        XCTAssertEqual(q.finished(ticketID: 1), [.release(host, lease: lease)])
        XCTAssertNil(q.renewDue, "nothing left to renew: no timer")
        XCTAssertNil(q.finished(ticketID: 1), "a second finish is not ours")
        XCTAssertTrue(q.hosts.isEmpty)
    }

    func testFullWaitsForAFreeMessageOrTheLeaseExpiry() {
        var q = Q(daemonID: "d", redisUp: true)
        let l = limit(rps: nil, cap: 1)
        _ = q.enqueue(ticket(1), limit: l, now: 0)
        XCTAssertEqual(q.refused(host, .full(seconds: 4), limit: l, now: 0), [])
        XCTAssertEqual(q.nextWakeup(limit: { _ in l }), 4, "the earliest lease's expiry")
        XCTAssertEqual(asks(q.slotFreed(host, limit: l, now: 1)), [1], "a free message asks again at once")
        // A free message that came while the question was on its way: ask again at once.
        XCTAssertEqual(asks(q.slotFreed(host, limit: l, now: 1.5)), [])
        XCTAssertEqual(asks(q.refused(host, .full(seconds: 3), limit: l, now: 1.6)), [1])
    }

    func testCancelWhileAskingGivesTheLeaseBack() {
        var q = Q(daemonID: "d", redisUp: true)
        let l = limit(cap: 1)
        _ = q.enqueue(ticket(1), limit: l, now: 0)
        XCTAssertEqual(q.cancel(ticket(1)), .removed([]))
        let actions = q.granted(host, delay: 0, limit: l, now: 0)
        XCTAssertEqual(admits(actions), [])
        XCTAssertEqual(actions.count, 1)
        if case .release = actions[0] {} else { XCTFail("expected a release, got \(actions)") }
        XCTAssertEqual(q.cancel(ticket(1)), .notFound)
    }

    func testPauseSendsReservationsBackAndAsksAfterIt() {
        var q = Q(daemonID: "d", redisUp: true)
        let l = limit()
        _ = q.enqueue(ticket(1), limit: l, now: 0)
        _ = q.enqueue(ticket(2), limit: l, now: 0)
        _ = q.granted(host, delay: 0.05, limit: l, now: 0)  // 1 reserved for 0.05; 2 asks
        let paused = q.paused(host, seconds: 2, now: 0.01)
        XCTAssertEqual(paused.count, 1, "the reservation's lease is given back")
        XCTAssertEqual(admits(q.tick(limit: { _ in l }, now: 0.05)), [], "nothing starts during the pause")
        _ = q.refused(host, .paused(seconds: 1.99), limit: l, now: 0.01)  // 2's answer
        XCTAssertEqual(q.nextWakeup(limit: { _ in l }) ?? -1, 2.01, accuracy: 1e-9)
        let after = q.tick(limit: { _ in l }, now: 2.01)
        XCTAssertEqual(asks(after), [1], "the first request asks first after the pause")
    }

    func testLocalModeMovesWaitingRequestsToTheFallbackAndBack() {
        var q = Q(daemonID: "d", redisUp: true)
        let l = limit(mode: .local)
        _ = q.enqueue(ticket(1), limit: l, now: 0)
        _ = q.enqueue(ticket(2), limit: l, now: 0)
        XCTAssertEqual(q.redisWentDown(limit: { _ in l }, now: 1), [.toFallback(ticket(2))])
        XCTAssertEqual(q.unanswered(host, limit: l, now: 1), [.toFallback(ticket(1))], "the question in flight fails")
        XCTAssertEqual(q.enqueue(ticket(3), limit: l, now: 1), [.toFallback(ticket(3))])
        XCTAssertTrue(q.fallbackAdmitted(ticket(3)))
        let back = q.redisCameBack(limit: { _ in l }, now: 2)
        XCTAssertEqual(back, [.fromFallback(ticket(1)), .fromFallback(ticket(2))])
        XCTAssertEqual(asks(q.returnedFromFallback(ticket(1), limit: l, now: 2)), [1])
        XCTAssertEqual(asks(q.returnedFromFallback(ticket(2), limit: l, now: 2)), [])
        XCTAssertEqual(q.finished(ticketID: 3), [.fallbackFinished(host)], "the fallback's request ends there")
    }

    func testWaitModeKeepsRequestsQueuedUntilRedisIsBack() {
        var q = Q(daemonID: "d", redisUp: true)
        let l = limit(mode: .wait)
        _ = q.enqueue(ticket(1), limit: l, now: 0)
        XCTAssertEqual(q.redisWentDown(limit: { _ in l }, now: 1), [])
        XCTAssertEqual(q.unanswered(host, limit: l, now: 1), [])
        XCTAssertEqual(q.enqueue(ticket(2), limit: l, now: 1), [])
        XCTAssertNil(q.nextWakeup(limit: { _ in l }), "no timer while Redis is down: the link reconnects")
        XCTAssertEqual(q.counts()[host]?.queued, 2)
        XCTAssertEqual(asks(q.redisCameBack(limit: { _ in l }, now: 3)), [1])
    }

    func testRedisBackRenewsRunningLeases() {
        var q = Q(daemonID: "d", redisUp: true)
        let l = limit(cap: 4)
        _ = q.enqueue(ticket(1), limit: l, now: 0)
        _ = q.granted(host, delay: 0, limit: l, now: 0)
        _ = q.redisWentDown(limit: { _ in l }, now: 1)
        XCTAssertEqual(q.tick(limit: { _ in l }, now: 10), [], "no renewal while down")
        let back = q.redisCameBack(limit: { _ in l }, now: 11)
        XCTAssertEqual(back.count, 1)
        if case .renew(_, let leases) = back[0] { XCTAssertEqual(leases.count, 1) } else { XCTFail("\(back)") }
    }

    func testLocalPartScalesTheLimit() {
        var l = limit(rps: 20, cap: 5)
        l.burst = 4
        l.localShare = 0.25
        let part = l.localPart
        XCTAssertEqual(part.requestsPerSecond, 5)
        XCTAssertEqual(part.maxConcurrent, 1)
        XCTAssertEqual(part.burst, 1)
        XCTAssertFalse(part.shared)
    }

    func testRedisURL() throws {
        let u = try RedisURL("redis://:pa%40ss@10.0.0.5:6380/3")
        XCTAssertEqual(u.endpoint, .tcp(host: "10.0.0.5", port: 6380))
        XCTAssertEqual(u.database, 3)
        XCTAssertEqual(u.password, "pa@ss")
        XCTAssertFalse(u.description.contains("pa"), u.description)
        XCTAssertEqual(try RedisURL("redis://localhost").endpoint, .tcp(host: "localhost", port: 6379))
        XCTAssertEqual(try RedisURL("unix:///run/redis.sock?db=2").endpoint, .unix(path: "/run/redis.sock"))
        XCTAssertThrowsError(try RedisURL("http://x"))
        XCTAssertThrowsError(try RedisURL("redis://host:0"))
    }
}
