import XCTest

@testable import FetchEngine

/// The engine's fair turns: a transfer takes at most a quantum of body per turn of the loop,
/// is recorded to be unpaused once the next turn starts, and starts the new turn afresh.
final class FairTurnsTests: XCTestCase {
    func testQuantumPerTurn() {
        let turns = FairTurns()
        var seen: UInt64 = 0, bytes = 0
        let piece = 16 << 10
        var taken = 0
        while turns.mayTake(piece, turnSeen: &seen, turnBytes: &bytes, id: 7) { taken += piece }
        XCTAssertEqual(taken, FairTurns.quantum, "a turn's share, then a pause")
        XCTAssertTrue(turns.hasYielded)
        XCTAssertEqual(turns.nextTurn(), [7], "unpaused in the next turn")
        XCTAssertFalse(turns.hasYielded)
        XCTAssertTrue(turns.mayTake(piece, turnSeen: &seen, turnBytes: &bytes, id: 7), "a new turn, a new share")
        XCTAssertEqual(bytes, piece)
        XCTAssertEqual(turns.nextTurn(), [], "nothing yielded: nothing to unpause")
    }

    func testTransfersHaveSharesOfTheirOwn() {
        let turns = FairTurns()
        var seenA: UInt64 = 0, bytesA = 0, seenB: UInt64 = 0, bytesB = 0
        XCTAssertTrue(turns.mayTake(FairTurns.quantum, turnSeen: &seenA, turnBytes: &bytesA, id: 1))
        XCTAssertFalse(turns.mayTake(1, turnSeen: &seenA, turnBytes: &bytesA, id: 1))
        XCTAssertTrue(turns.mayTake(FairTurns.quantum - 1, turnSeen: &seenB, turnBytes: &bytesB, id: 2),
                      "one transfer's use leaves another's share whole")
        XCTAssertEqual(turns.nextTurn(), [1])
    }

    func testALoneTransferIsNeverPaused() {
        let turns = FairTurns()
        turns.alone = true
        var seen: UInt64 = 0, bytes = 0
        for _ in 0..<(4 * FairTurns.quantum / (16 << 10)) {
            XCTAssertTrue(turns.mayTake(16 << 10, turnSeen: &seen, turnBytes: &bytes, id: 3), "no one to be fair to")
        }
        XCTAssertFalse(turns.hasYielded)
        turns.alone = false
        XCTAssertEqual(turns.nextTurn(), [])
        XCTAssertTrue(turns.mayTake(FairTurns.quantum, turnSeen: &seen, turnBytes: &bytes, id: 3),
                      "with company again, a fresh share in the new turn")
        XCTAssertFalse(turns.mayTake(1, turnSeen: &seen, turnBytes: &bytes, id: 3))
    }
}
