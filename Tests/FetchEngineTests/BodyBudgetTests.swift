@testable import FetchEngine
import XCTest

/// One client's memory bound: bodies being received plus answers it has not read.
final class BodyBudgetTests: XCTestCase {
    private final class Wakes: @unchecked Sendable {
        var ids: [UInt64] = []
        func resume(_ id: UInt64) -> @Sendable () -> Void { { self.ids.append(id) } }
    }

    func testWithinTheLimitNothingPauses() {
        let budget = BodyBudget(limit: 100)
        let wakes = Wakes()
        XCTAssertTrue(budget.take(60, for: 1, resume: wakes.resume(1)))
        XCTAssertTrue(budget.take(40, for: 2, resume: wakes.resume(2)))
        XCTAssertEqual(budget.snapshot.held, 100)
        XCTAssertEqual(budget.snapshot.paused, 0)
    }

    func testOverTheLimitTheOldestGoesOnAndTheOthersPause() {
        let budget = BodyBudget(limit: 100)
        let wakes = Wakes()
        XCTAssertTrue(budget.take(60, for: 1, resume: wakes.resume(1)))
        XCTAssertTrue(budget.take(40, for: 2, resume: wakes.resume(2)))
        XCTAssertFalse(budget.take(10, for: 2, resume: wakes.resume(2)), "a younger transfer pauses")
        XCTAssertFalse(budget.take(10, for: 3, resume: wakes.resume(3)), "so does a new one")
        XCTAssertTrue(budget.take(10, for: 1, resume: wakes.resume(1)), "the oldest may pass the bound: progress")
        XCTAssertEqual(budget.snapshot.paused, 2)
        // The oldest's answer is queued (outbound 70) and its body released: room again.
        budget.outboundChanged(to: 70, version: 1)
        XCTAssertEqual(wakes.ids, [], "nothing drained")
        budget.release(1)
        XCTAssertEqual(wakes.ids.sorted(), [2, 3], "2 is the oldest now, and it was paused: they ask again")
        XCTAssertTrue(budget.take(10, for: 2, resume: wakes.resume(2)), "the new oldest goes on (70 waiting < 100)")
        XCTAssertFalse(budget.take(10, for: 3, resume: wakes.resume(3)), "50 held + 70 waiting: 3 waits")
        budget.outboundChanged(to: 0, version: 2)
        XCTAssertEqual(wakes.ids.sorted(), [2, 3, 3], "the client read: room for 3")
    }

    func testAClientThatDoesNotReadStopsEvenTheOldest() {
        let budget = BodyBudget(limit: 100)
        let wakes = Wakes()
        budget.outboundChanged(to: 150, version: 1)
        XCTAssertFalse(budget.take(1, for: 1, resume: wakes.resume(1)), "answers unread past the bound: all wait")
        budget.outboundChanged(to: 120, version: 2)
        XCTAssertEqual(wakes.ids, [], "still over the bound")
        budget.outboundChanged(to: 99, version: 3)
        XCTAssertEqual(wakes.ids, [1], "the oldest (and only) paused transfer may go on")
        XCTAssertTrue(budget.take(1, for: 1, resume: wakes.resume(1)))
    }

    func testAReportOvertakenByANewerOneIsIgnored() {
        let budget = BodyBudget(limit: 100)
        let wakes = Wakes()
        budget.outboundChanged(to: 0, version: 5)
        budget.outboundChanged(to: 500, version: 4)
        XCTAssertTrue(budget.take(50, for: 1, resume: wakes.resume(1)), "the stale 500 was not taken")
    }

    func testAFailedAttemptAndAGoneClientFreeEverything() {
        let budget = BodyBudget(limit: 100)
        let wakes = Wakes()
        XCTAssertTrue(budget.take(100, for: 1, resume: wakes.resume(1)))
        XCTAssertFalse(budget.take(1, for: 2, resume: wakes.resume(2)))
        budget.release(1)
        budget.release(1)
        XCTAssertEqual(wakes.ids, [2])
        XCTAssertEqual(budget.snapshot.held, 0)
        budget.outboundChanged(to: 1000, version: 1)
        XCTAssertFalse(budget.take(1, for: 3, resume: wakes.resume(3)))
        budget.lift()
        XCTAssertEqual(wakes.ids, [2, 3], "the peer is gone: nothing is held back")
        XCTAssertTrue(budget.take(1000, for: 4, resume: wakes.resume(4)))
    }
}
