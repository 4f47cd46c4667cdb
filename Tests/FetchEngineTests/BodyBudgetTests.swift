@testable import FetchEngine
import XCTest

/// One client's memory bound: bodies being received, answers being made, and answers it has
/// not read. Driven with no I/O: `take` as a transfer's write callback calls it.
final class BodyBudgetTests: XCTestCase {
    private final class Wakes: @unchecked Sendable {
        var ids: [UInt64] = []
        func resume(_ id: UInt64) -> @Sendable () -> Void { { self.ids.append(id) } }
    }

    /// A transfer as the engine runs it: what it holds, and its write callback.
    private final class Transfer {
        let id: UInt64
        var holding = 0
        init(_ id: UInt64) { self.id = id }
        func take(_ bytes: Int, _ budget: BodyBudget, _ wakes: Wakes) -> Bool {
            guard budget.take(bytes, for: id, holding: holding, resume: wakes.resume(id)) else { return false }
            holding += bytes
            return true
        }
        func end(_ budget: BodyBudget) { budget.transferEnded(id, holding: holding) }
    }

    func testWithinTheLimitNothingPauses() {
        let budget = BodyBudget(limit: 100)
        let wakes = Wakes()
        let (a, b) = (Transfer(1), Transfer(2))
        XCTAssertTrue(a.take(60, budget, wakes))
        XCTAssertTrue(b.take(40, budget, wakes))
        XCTAssertEqual(budget.snapshot.held, 100)
        XCTAssertEqual(budget.snapshot.paused, 0)
    }

    func testOverTheLimitTheLastRunningTransferGoesOn() {
        let budget = BodyBudget(limit: 100)
        let wakes = Wakes()
        let (a, b, c) = (Transfer(1), Transfer(2), Transfer(3))
        XCTAssertTrue(a.take(60, budget, wakes))
        XCTAssertTrue(b.take(40, budget, wakes))
        XCTAssertFalse(b.take(10, budget, wakes), "over the bound while another runs: pause")
        XCTAssertFalse(c.take(10, budget, wakes), "so does a new one (a holds bytes and runs)")
        XCTAssertTrue(a.take(10, budget, wakes), "every other holder is paused: a goes on (progress)")
        XCTAssertEqual(budget.snapshot.paused, 2)
        // a's answer is queued (70 bytes waiting), then a ends.
        budget.outboundChanged(to: 70, version: 1)
        XCTAssertEqual(wakes.ids, [], "nothing drained")
        a.end(budget)
        XCTAssertEqual(wakes.ids.sorted(), [2, 3], "no holder runs now: the paused ask again")
        XCTAssertFalse(c.take(10, budget, wakes), "40 held + 70 waiting: over, and b holds and runs")
        XCTAssertTrue(b.take(10, budget, wakes), "b's other holder... none runs: b goes on")
        budget.outboundChanged(to: 0, version: 2)
        XCTAssertEqual(wakes.ids.sorted(), [2, 3, 3], "the client read: room for c")
    }

    func testAClientThatDoesNotReadStopsEveryone() {
        let budget = BodyBudget(limit: 100)
        let wakes = Wakes()
        let a = Transfer(1)
        budget.outboundChanged(to: 150, version: 1)
        XCTAssertFalse(a.take(1, budget, wakes), "answers unread past the bound: all wait, even alone")
        budget.outboundChanged(to: 120, version: 2)
        XCTAssertEqual(wakes.ids, [], "still over the bound")
        budget.outboundChanged(to: 99, version: 3)
        XCTAssertEqual(wakes.ids, [1], "under it: the only transfer may go on")
        XCTAssertTrue(a.take(1, budget, wakes))
    }

    func testAnAnswerBeingMadeCountsUntilQueued() {
        let budget = BodyBudget(limit: 100)
        let wakes = Wakes()
        let (a, b, c) = (Transfer(1), Transfer(2), Transfer(3))
        XCTAssertTrue(a.take(80, budget, wakes))
        budget.answerPending(80)  // made on another thread...
        a.end(budget)             // ...after the transfer has ended
        XCTAssertTrue(b.take(20, budget, wakes))
        XCTAssertFalse(c.take(1, budget, wakes), "the 80 of the answer in the making still count")
        budget.outboundChanged(to: 110, version: 1)
        budget.answerQueued(80)
        XCTAssertEqual(wakes.ids, [], "queued: now counted as waiting, which is over the bound")
        budget.outboundChanged(to: 0, version: 2)
        XCTAssertEqual(wakes.ids, [3])
    }

    func testNobodyPassesTheBoundWhileAnAnswerIsBeingMade() {
        // Else a client that never reads has every body turned into an answer, one after
        // another, before any of them is queued (450-520 MB for 20 x 20 MB: measured).
        let budget = BodyBudget(limit: 100)
        let wakes = Wakes()
        let (a, b) = (Transfer(1), Transfer(2))
        XCTAssertTrue(a.take(100, budget, wakes))
        budget.answerPending(100)
        a.end(budget)
        XCTAssertFalse(b.take(1, budget, wakes), "alone, but an answer of 100 is in the making")
        budget.answerQueued(100)
        XCTAssertEqual(wakes.ids, [2], "queued (and the client reads): b goes on")
    }

    func testAReportOvertakenByANewerOneIsIgnored() {
        let budget = BodyBudget(limit: 100)
        let wakes = Wakes()
        budget.outboundChanged(to: 0, version: 5)
        budget.outboundChanged(to: 500, version: 4)
        XCTAssertTrue(Transfer(1).take(50, budget, wakes), "the stale 500 was not taken")
    }

    func testAGoneClientHoldsNothingBack() {
        let budget = BodyBudget(limit: 100)
        let wakes = Wakes()
        let (a, b) = (Transfer(1), Transfer(2))
        XCTAssertTrue(a.take(100, budget, wakes))
        XCTAssertFalse(b.take(1, budget, wakes))
        a.end(budget)
        XCTAssertEqual(wakes.ids, [2])
        XCTAssertEqual(budget.snapshot.held, 0)
        budget.outboundChanged(to: 1000, version: 1)
        XCTAssertFalse(b.take(1, budget, wakes))
        budget.lift()
        XCTAssertEqual(wakes.ids, [2, 2], "the peer is gone: nothing is held back")
        XCTAssertTrue(Transfer(3).take(1000, budget, wakes))
    }
}
