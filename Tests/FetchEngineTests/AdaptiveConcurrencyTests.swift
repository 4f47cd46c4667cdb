import FetchEngine
import XCTest

/// AIMD concurrency (`adaptive`), the policy alone and as the host scheduler applies it, with a
/// moved clock.
final class AdaptiveConcurrencyTests: XCTestCase {
    let host = HostKey(scheme: "https", name: "api.example", port: 443)

    func testHalvedOnOverloadDownToOne() {
        var a = AdaptiveConcurrency(ceiling: 16)
        XCTAssertEqual(a.current, 16)
        var now = 0.0
        for want in [8, 4, 2, 1, 1] {
            now += 1
            a.overloaded(elapsed: 0.1, now: now, ceiling: 16)
            XCTAssertEqual(a.current, want)
        }
    }

    func testOneMoreAfterEachCurrentSuccessesInARow() {
        var a = AdaptiveConcurrency(ceiling: 5)
        a.overloaded(elapsed: 0, now: 1, ceiling: 5)
        a.overloaded(elapsed: 0, now: 2, ceiling: 5)
        XCTAssertEqual(a.current, 1)
        // 1 success -> 2; 2 more -> 3; 3 more -> 4; 4 more -> 5; then it stays.
        var seen: [Int] = []
        for _ in 0..<14 {
            a.succeeded(ceiling: 5)
            seen.append(a.current)
        }
        XCTAssertEqual(seen, [2, 2, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 5])
    }

    func testAnOverloadEndsTheRunOfSuccesses() {
        var a = AdaptiveConcurrency(ceiling: 8)
        a.overloaded(elapsed: 0, now: 10, ceiling: 8)  // 4
        a.succeeded(ceiling: 8)
        a.succeeded(ceiling: 8)
        a.succeeded(ceiling: 8)
        // A request that was in flight at the cut: no second cut, but the run starts over.
        a.overloaded(elapsed: 1, now: 10.5, ceiling: 8)
        XCTAssertEqual(a.current, 4)
        XCTAssertEqual(a.successes, 0)
        for _ in 0..<3 { a.succeeded(ceiling: 8) }
        XCTAssertEqual(a.current, 4, "three in a row are not four")
        a.succeeded(ceiling: 8)
        XCTAssertEqual(a.current, 5)
    }

    func testRequestsInFlightAtTheCutDoNotCutAgain() {
        var a = AdaptiveConcurrency(ceiling: 16)
        // Sixteen requests started at t = 0; their 429s come back from t = 0.1 on.
        a.overloaded(elapsed: 0.1, now: 0.1, ceiling: 16)
        XCTAssertEqual(a.current, 8)
        for index in 1..<16 { a.overloaded(elapsed: 0.1 + Double(index) * 0.001, now: 0.1 + Double(index) * 0.001, ceiling: 16) }
        XCTAssertEqual(a.current, 8, "one overload, one cut")
        // A request started after the cut and refused: a new overload.
        a.overloaded(elapsed: 0.05, now: 0.3, ceiling: 16)
        XCTAssertEqual(a.current, 4)
    }

    func testALowerCeilingBounds() {
        var a = AdaptiveConcurrency(ceiling: 10)
        a.succeeded(ceiling: 3)
        XCTAssertEqual(a.current, 3)
        XCTAssertTrue(a.isAtCeiling(3))
        a.overloaded(elapsed: 0, now: 1, ceiling: 3)
        XCTAssertEqual(a.current, 1)
    }

    // MARK: in the scheduler

    private func ticket(_ id: UInt64) -> HostScheduler.Ticket { .init(id: id, host: host, priority: 0) }

    func testTheSchedulerStartsNoMoreThanConcurrencyNow() throws {
        var limit = HostScheduler.Limit(maxConcurrent: 8)
        limit.adaptive = true
        var s = HostScheduler(defaultLimit: limit)
        for id in UInt64(1)...8 { XCTAssertTrue(s.startNow(ticket(id), now: 0)) }
        for id in UInt64(9)...20 { try s.enqueue(ticket(id)) }
        // One 429: 4 may run; 7 still do.
        s.adapt(host: host, overloaded: true, elapsed: 0.2, now: 0.2)
        s.finished(host: host)
        XCTAssertEqual(s.hosts[host]?.concurrencyNow(limit), 4)
        XCTAssertEqual(s.admit(now: 0.3), [])
        for _ in 0..<3 {
            s.adapt(host: host, overloaded: false, elapsed: 0.3, now: 0.3)
            s.finished(host: host)
        }
        XCTAssertEqual(s.admit(now: 0.3), [], "7 - 3 = 4 running: the cap")
        s.adapt(host: host, overloaded: false, elapsed: 0.3, now: 0.4)
        s.finished(host: host)
        XCTAssertEqual(s.hosts[host]?.concurrencyNow(limit), 5, "4 successes in a row at 4")
        XCTAssertEqual(s.admit(now: 0.4).map(\.id), [9, 10])
        XCTAssertNil(s.nextWakeup(now: 0.4), "held by the cap: woken by an end, not a timer")
    }

    func testBackAtTheCeilingTheHostIsForgotten() {
        var limit = HostScheduler.Limit(maxConcurrent: 2)
        limit.adaptive = true
        var s = HostScheduler(defaultLimit: limit)
        XCTAssertTrue(s.startNow(ticket(1), now: 0))
        s.adapt(host: host, overloaded: true, elapsed: 0, now: 0)
        s.finished(host: host)
        XCTAssertEqual(s.hosts[host]?.adaptive?.current, 1, "remembered while below the ceiling, idle or not")
        XCTAssertTrue(s.startNow(ticket(2), now: 1))
        s.adapt(host: host, overloaded: false, elapsed: 0, now: 1)
        s.finished(host: host)
        XCTAssertNil(s.hosts[host], "at the ceiling again: nothing to remember")
    }

    func testNotAdaptiveIgnoresOutcomes() {
        var s = HostScheduler(defaultLimit: .init(maxConcurrent: 4))
        XCTAssertTrue(s.startNow(ticket(1), now: 0))
        s.adapt(host: host, overloaded: true, elapsed: 0, now: 0)
        XCTAssertNil(s.hosts[host]?.adaptive)
        XCTAssertEqual(s.hosts[host]?.concurrencyNow(s.limit(for: host)), 4)
    }
}
