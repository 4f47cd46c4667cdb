import FetchEngine
import XCTest

/// `HostScheduler.noteServer`: what the server says of its budget bounds the starts until its
/// reset, with a moved clock.
final class ServerBudgetSchedulingTests: XCTestCase {
    let host = HostKey(scheme: "https", name: "api.example", port: 443)

    private func ticket(_ id: UInt64) -> HostScheduler.Ticket {
        .init(id: id, host: host, priority: 0)
    }

    private func scheduler(maxConcurrent: Int? = 10) -> HostScheduler {
        HostScheduler(defaultLimit: .init(maxConcurrent: maxConcurrent))
    }

    func testSpentBudgetPausesUntilTheReset() throws {
        var s = scheduler()
        XCTAssertTrue(s.startNow(ticket(1), now: 0))
        // Its answer: nothing left until t = 30.
        XCTAssertTrue(s.noteServer(host: host, remaining: 0, resetAt: 30, now: 1))
        s.finished(host: host)
        XCTAssertEqual(s.hosts[host]?.pausedUntil, 30)
        XCTAssertFalse(s.startNow(ticket(2), now: 2))
        try s.enqueue(ticket(2))
        XCTAssertEqual(s.admit(now: 29.9), [])
        XCTAssertEqual(s.nextWakeup(now: 2), 30)
        XCTAssertEqual(s.admit(now: 30).map(\.id), [2])
    }

    func testRemainingThatTheRunningRequestsTakePausesAtOnce() {
        var s = scheduler()
        for id in UInt64(1)...4 { XCTAssertTrue(s.startNow(ticket(id), now: 0)) }
        // The first answer says 3 left: the 3 others running take them.
        XCTAssertTrue(s.noteServer(host: host, remaining: 3, resetAt: 10, now: 0.1))
        s.finished(host: host)
        XCTAssertFalse(s.startNow(ticket(5), now: 0.2))
        XCTAssertEqual(s.hosts[host]?.server, ServerBudget(remaining: 3, resetAt: 10, startsLeft: 0))
    }

    func testTheStartsLeftGoThenThePause() throws {
        var s = scheduler()
        XCTAssertTrue(s.startNow(ticket(1), now: 0))
        // 3 left and nothing else running: 3 more may start, then none until the reset.
        XCTAssertFalse(s.noteServer(host: host, remaining: 3, resetAt: 5, now: 0.1))
        s.finished(host: host)
        for id in 2...6 { try s.enqueue(ticket(UInt64(id))) }
        XCTAssertEqual(s.admit(now: 0.2).map(\.id), [2, 3, 4])
        XCTAssertEqual(s.hosts[host]?.pausedUntil, 5)
        XCTAssertEqual(s.admit(now: 4.9), [])
        XCTAssertEqual(s.admit(now: 5).map(\.id), [5, 6], "after the reset, no bound until the server says more")
    }

    func testAPausePastTheResetIsForgotten() {
        var s = scheduler()
        XCTAssertTrue(s.startNow(ticket(1), now: 0))
        s.noteServer(host: host, remaining: 7, resetAt: 2, now: 0.5)
        s.finished(host: host)
        XCTAssertNotNil(s.hosts[host]?.server, "shown until the reset")
        s.expire(now: 1.9)
        XCTAssertNotNil(s.hosts[host])
        s.expire(now: 2)
        XCTAssertNil(s.hosts[host], "nothing left to remember")
    }

    func testAfterTheResetTheQuotaStartsThenWaitsForAnAnswer() throws {
        var s = scheduler()
        XCTAssertTrue(s.startNow(ticket(1), now: 0))
        XCTAssertTrue(s.noteServer(host: host, remaining: 0, resetAt: 1, limit: 2, now: 0.1))
        s.finished(host: host)
        for id in 2...7 { try s.enqueue(ticket(UInt64(id))) }
        s.expire(now: 1)
        XCTAssertEqual(s.admit(now: 1).map(\.id), [2, 3], "a window's quota, not maxConcurrent")
        XCTAssertNil(s.nextWakeup(now: 1), "no timer: an answer or an end wakes it")
        XCTAssertEqual(s.admit(now: 5), [])
        // The first answer of the new window: 1 left, the other one running takes it.
        XCTAssertTrue(s.noteServer(host: host, remaining: 1, resetAt: 2, limit: 2, now: 1.1))
        s.finished(host: host)
        s.finished(host: host)
        s.expire(now: 2)
        XCTAssertEqual(s.admit(now: 2).map(\.id), [4, 5])
        // Those end without a word from the server: no bound any more.
        s.finished(host: host)
        s.finished(host: host)
        XCTAssertEqual(s.admit(now: 2.1).map(\.id), [6, 7])
    }

    func testALateAnswerOfTheSameWindowDoesNotRaiseWhatIsLeft() {
        var s = scheduler()
        for id in UInt64(1)...3 { XCTAssertTrue(s.startNow(ticket(id), now: 0)) }
        // The answers come back in another order than the server counted them.
        XCTAssertTrue(s.noteServer(host: host, remaining: 0, resetAt: 1, now: 0.1))
        s.finished(host: host)
        XCTAssertTrue(s.noteServer(host: host, remaining: 2, resetAt: 1, now: 0.2))
        s.finished(host: host)
        XCTAssertTrue(s.noteServer(host: host, remaining: 1, resetAt: 1, now: 0.3))
        s.finished(host: host)
        XCTAssertEqual(s.hosts[host]?.server?.remaining, 0)
        XCTAssertFalse(s.startNow(ticket(4), now: 0.4))
        XCTAssertTrue(s.startNow(ticket(4), now: 1))
    }

    func testAResetInThePastDoesNotPause() {
        var s = scheduler()
        XCTAssertTrue(s.startNow(ticket(1), now: 0))
        XCTAssertFalse(s.noteServer(host: host, remaining: 0, resetAt: 1, now: 1))
        s.finished(host: host)
        XCTAssertTrue(s.startNow(ticket(2), now: 1))
    }
}
