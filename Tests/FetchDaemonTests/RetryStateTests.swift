@testable import FetchDaemon
import FetchEngine
import Foundation
import XCTest

/// A job's retry bookkeeping, pure: the clock and the jitter are passed in. A durable job
/// resumed from its written-down state goes on with the attempts it has used.
final class RetryStateTests: XCTestCase {
    let now = Date(timeIntervalSince1970: 1_800_000_000)
    let unavailable = RetryPolicy.Outcome.status(503, retryAfter: nil)

    /// Failures judged one after another, the clock moved by each wait; the waits asked for.
    private func waits(_ state: inout RetryState, _ policy: RetryPolicy, elapsed start: Double = 0) -> [Double] {
        var elapsed = start
        var result: [Double] = []
        while case .retry(let wait, _) = state.judge(unavailable, policy: policy, now: now + elapsed, elapsed: elapsed,
                                                     drawJitter: { 0.25 }) {
            result.append(wait)
            elapsed += wait
        }
        return result
    }

    func testAFreshJobUsesEveryAttempt() {
        var state = RetryState()
        XCTAssertEqual(waits(&state, RetryPolicy.defaults(for: "GET")), [1.25, 2.5, 5, 10])
        XCTAssertEqual(state.failures, 5, "maxAttempts failures, the last one stopped it")
        XCTAssertEqual(state.jitter, 0.25)
        XCTAssertEqual(state.waited, 18.75)
    }

    func testAResumedJobGoesOnFromTheStoredCount() {
        // Two failures written down (jitter 0.25, 3.75 s waited): the job after the restart
        // has the three attempts left and the same backoff sequence, not a fresh one.
        var state = RetryState(jitter: 0.25, failures: 2, waited: 3.75)
        XCTAssertEqual(waits(&state, RetryPolicy.defaults(for: "GET")), [5, 10])
        XCTAssertEqual(state.failures, 5)
        XCTAssertEqual(state.waited, 18.75)
    }

    func testAllAttemptsUsedBeforeTheRestartEndsAtTheNextFailure() {
        var state = RetryState(jitter: 0.5, failures: 4, waited: 10)
        XCTAssertEqual(state.judge(unavailable, policy: RetryPolicy.defaults(for: "GET"), now: now, elapsed: 0,
                                   drawJitter: { XCTFail("the stored jitter is kept"); return 0 }), .stop)
        XCTAssertEqual(state.failures, 5)
    }

    func testTheWaitBudgetCountsWaitsBeforeTheRestart() {
        var policy = RetryPolicy(enabled: true, maxAttempts: 10, maxInterval: 5)
        XCTAssertEqual({ var s = RetryState(); return waits(&s, policy) }(), [1.25, 2.5, 5, 5], "15 s budget")
        var resumed = RetryState(jitter: 0.25, failures: 2, waited: 3.75)
        XCTAssertEqual(waits(&resumed, policy), [5, 5])
        policy.maxAttempts = 3
        var last = RetryState(jitter: 0.25, failures: 2, waited: 3.75)
        XCTAssertEqual(waits(&last, policy), [])
    }

    func testMaxElapsedCountsFromTheFirstStart() {
        var policy = RetryPolicy.defaults(for: "GET")
        policy.maxElapsed = 30
        // First started 24 s before this daemon resumed it, 1 s ago: a 5 s wait ends at 30 s,
        // the limit; the next (10 s) would end past it. Without the time before: both.
        var resumed = RetryState(jitter: 0.25, failures: 2, waited: 3.75, priorElapsed: 24)
        XCTAssertEqual(waits(&resumed, policy, elapsed: 1), [5])
        var fresh = RetryState(jitter: 0.25, failures: 2, waited: 3.75)
        XCTAssertEqual(waits(&fresh, policy, elapsed: 1), [5, 10])
    }

    func testAResumedMachineCountsOnFromTheStoredAttempts() {
        var machine = JobMachine(attempts: 4)
        _ = machine.handle(.begin, now: 0)
        XCTAssertEqual(machine.handle(.starting, now: 0).actions.list, [.startTransfer])
        XCTAssertEqual(machine.attempts, 5)
        XCTAssertEqual(machine.handle(.attemptEnded(.again(delay: 1, reason: "status 503")), now: 0).actions.list,
                       [.scheduleRetry(delay: 1, attempt: 6, reason: "status 503")])
    }
}
