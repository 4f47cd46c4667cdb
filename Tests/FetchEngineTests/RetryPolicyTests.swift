import FetchEngine
import Foundation
import XCTest

final class RetryPolicyTests: XCTestCase {
    let now = Date(timeIntervalSince1970: 1_800_000_000)

    /// Runs the policy as the job runner does, moving the clock by each wait instead of sleeping.
    private func waits(_ policy: RetryPolicy, outcome: RetryPolicy.Outcome, jitter: Double) -> [Double] {
        var waited = 0.0
        var result: [Double] = []
        var attempt = 1
        var clock = now
        while case .retry(let wait, _) = policy.decide(attempt: attempt, outcome: outcome, waitedSoFar: waited, jitter: jitter, now: clock) {
            result.append(wait)
            waited += wait
            clock += wait
            attempt += 1
        }
        return result
    }

    func testDefaultsByMethod() {
        XCTAssertTrue(RetryPolicy.defaults(for: "GET").enabled)
        XCTAssertTrue(RetryPolicy.defaults(for: "put").enabled)
        XCTAssertTrue(RetryPolicy.defaults(for: "OPTIONS").enabled)
        XCTAssertFalse(RetryPolicy.defaults(for: "POST").enabled)
        XCTAssertFalse(RetryPolicy.defaults(for: "PATCH").enabled)
        XCTAssertEqual(RetryPolicy.defaults(for: "HEAD").maxInterval, 60)
        XCTAssertEqual(RetryPolicy.defaults(for: "DELETE").maxInterval, 600)
        XCTAssertEqual(RetryPolicy.defaults(for: "GET").maxAttempts, 5)
    }

    func testExactWaitSequenceDoublesFromTheJitteredFirstWait() {
        let policy = RetryPolicy.defaults(for: "GET")
        XCTAssertEqual(waits(policy, outcome: .status(503, retryAfter: nil), jitter: 0), [1, 2, 4, 8])
        XCTAssertEqual(waits(policy, outcome: .failure(.reset), jitter: 0.5), [1.5, 3, 6, 12])
    }

    func testEachWaitIsCappedAndTheTotalStopsAtThreeTimesTheCap() {
        let policy = RetryPolicy(enabled: true, maxAttempts: 10, maxInterval: 5)
        // 1, 2, 4, then 5 (capped) ... until the total would pass 15.
        XCTAssertEqual(waits(policy, outcome: .failure(.timeout), jitter: 0), [1, 2, 4, 5])
    }

    func testRetriedStatusesAndFailures() {
        let policy = RetryPolicy.defaults(for: "GET")
        for status in [408, 429, 500, 502, 503, 504] {
            XCTAssertNotEqual(policy.decide(attempt: 1, outcome: .status(status, retryAfter: nil), waitedSoFar: 0, jitter: 0, now: now), .stop, "\(status)")
        }
        for status in [200, 301, 400, 404, 501] {
            XCTAssertEqual(policy.decide(attempt: 1, outcome: .status(status, retryAfter: nil), waitedSoFar: 0, jitter: 0, now: now), .stop, "\(status)")
        }
        for kind: TransferError.Kind in [.connect, .reset, .timeout] {
            XCTAssertNotEqual(policy.decide(attempt: 1, outcome: .failure(kind), waitedSoFar: 0, jitter: 0, now: now), .stop)
        }
        for kind: TransferError.Kind in [.dns, .tls, .protocol, .tooManyRedirects, .bodyTooLarge, .cancelled] {
            XCTAssertEqual(policy.decide(attempt: 1, outcome: .failure(kind), waitedSoFar: 0, jitter: 0, now: now), .stop)
        }
    }

    func testRequestStatusesReplaceTheDefaultList() {
        let policy = RetryPolicy(enabled: true, maxInterval: 60, statuses: [404])
        XCTAssertEqual(policy.decide(attempt: 1, outcome: .status(404, retryAfter: nil), waitedSoFar: 0, jitter: 0, now: now), .retry(after: 1, reason: "status 404"))
        XCTAssertEqual(policy.decide(attempt: 1, outcome: .status(503, retryAfter: nil), waitedSoFar: 0, jitter: 0, now: now), .stop)
    }

    func testDisabledAndLastAttemptStop() {
        XCTAssertEqual(RetryPolicy.defaults(for: "POST").decide(attempt: 1, outcome: .status(503, retryAfter: nil), waitedSoFar: 0, jitter: 0, now: now), .stop)
        XCTAssertEqual(RetryPolicy.defaults(for: "GET").decide(attempt: 5, outcome: .status(503, retryAfter: nil), waitedSoFar: 0, jitter: 0, now: now), .stop)
    }

    func testRetryAfterInSecondsFor429And503Only() {
        let policy = RetryPolicy.defaults(for: "GET")
        XCTAssertEqual(policy.decide(attempt: 1, outcome: .status(429, retryAfter: "7"), waitedSoFar: 0, jitter: 0, now: now), .retry(after: 7, reason: "status 429"))
        XCTAssertEqual(policy.decide(attempt: 1, outcome: .status(503, retryAfter: "0"), waitedSoFar: 0, jitter: 0.9, now: now), .retry(after: 0, reason: "status 503"))
        XCTAssertEqual(policy.decide(attempt: 1, outcome: .status(502, retryAfter: "7"), waitedSoFar: 0, jitter: 0, now: now), .retry(after: 1, reason: "status 502"), "502 ignores Retry-After")
        XCTAssertEqual(policy.decide(attempt: 1, outcome: .status(429, retryAfter: "3600"), waitedSoFar: 0, jitter: 0, now: now), .retry(after: 60, reason: "status 429"), "capped at maxInterval")
        XCTAssertEqual(policy.decide(attempt: 1, outcome: .status(429, retryAfter: "soon"), waitedSoFar: 0, jitter: 0, now: now), .retry(after: 1, reason: "status 429"), "unreadable: backoff")
    }

    func testRetryAfterAsAnHTTPDate() {
        let policy = RetryPolicy.defaults(for: "GET")
        // 1_800_000_000 is Fri, 15 Jan 2027 08:00:00 GMT.
        let date = "Fri, 15 Jan 2027 08:00:12 GMT"
        XCTAssertEqual(policy.decide(attempt: 1, outcome: .status(503, retryAfter: date), waitedSoFar: 0, jitter: 0, now: now), .retry(after: 12, reason: "status 503"))
        XCTAssertEqual(RetryAfter.seconds(from: "Friday, 15-Jan-27 08:00:30 GMT", now: now), 30)
        XCTAssertEqual(RetryAfter.seconds(from: "Fri Jan 15 08:00:45 2027", now: now), 45)
        XCTAssertEqual(RetryAfter.seconds(from: "Fri, 15 Jan 2027 07:00:00 GMT", now: now), 0, "a past date means now")
        XCTAssertNil(RetryAfter.seconds(from: "-5", now: now))
        XCTAssertNil(RetryAfter.seconds(from: "Fri, 15 Jan 2027 08:00:12 GMT and more", now: now), "the whole text must be a date")
        XCTAssertNil(RetryAfter.seconds(from: "soon", now: now))
        XCTAssertEqual(RetryAfter.seconds(from: "  7\t", now: now), 7, "blanks around delay-seconds")
    }
    func testFixedDelayReplacesTheBackoffAndItsBudget() {
        var policy = RetryPolicy.defaults(for: "GET")
        policy.maxAttempts = 6
        policy.delay = 70  // past maxInterval (60) and, five times, past 3 x 60
        XCTAssertEqual(waits(policy, outcome: .status(503, retryAfter: nil), jitter: 0.9), [70, 70, 70, 70, 70])
        policy.delay = 0
        XCTAssertEqual(waits(policy, outcome: .failure(.connect), jitter: 0.9), [0, 0, 0, 0, 0])
        policy.delay = 2
        XCTAssertEqual(policy.decide(attempt: 1, outcome: .status(503, retryAfter: "5"), waitedSoFar: 0, jitter: 0, now: now),
                       .retry(after: 5, reason: "status 503"), "a Retry-After still counts")
    }

    func testNoRetryBeginsPastMaxElapsed() {
        var policy = RetryPolicy.defaults(for: "GET")
        policy.maxElapsed = 10
        XCTAssertEqual(policy.decide(attempt: 1, outcome: .failure(.reset), waitedSoFar: 0, jitter: 0, now: now, elapsed: 8.5),
                       .retry(after: 1, reason: "reset"))
        XCTAssertEqual(policy.decide(attempt: 1, outcome: .failure(.reset), waitedSoFar: 0, jitter: 0, now: now, elapsed: 9.5), .stop)
    }

    func testAllErrorsRetriesEveryFailureKind() {
        var policy = RetryPolicy.defaults(for: "GET")
        XCTAssertEqual(policy.decide(attempt: 1, outcome: .failure(.dns), waitedSoFar: 0, jitter: 0, now: now), .stop)
        policy.allErrors = true
        XCTAssertEqual(policy.decide(attempt: 1, outcome: .failure(.dns), waitedSoFar: 0, jitter: 0, now: now),
                       .retry(after: 1, reason: "dns"))
        XCTAssertEqual(policy.decide(attempt: 1, outcome: .status(404, retryAfter: nil), waitedSoFar: 0, jitter: 0, now: now), .stop,
                       "statuses are still the list's")
    }
}
