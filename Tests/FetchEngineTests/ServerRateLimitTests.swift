import FetchEngine
import FoundationEssentials
import XCTest

final class ServerRateLimitTests: XCTestCase {
    let now = Date(timeIntervalSince1970: 1_767_225_600)  // 2026-01-01T00:00:00Z

    private func read(_ headers: [(String, String)]) -> ServerRateLimit.Budget? {
        ServerRateLimit.read(headers.map { HTTPHeader($0.0, $0.1) }, now: now)
    }

    private func budget(_ remaining: Int, _ reset: Double?, limit: Int? = nil) -> ServerRateLimit.Budget {
        ServerRateLimit.Budget(remaining: remaining, resetSeconds: reset, limit: limit)
    }

    func testNoRateLimitHeadersNoBudget() {
        XCTAssertNil(read([]))
        XCTAssertNil(read([("Content-Type", "text/plain"), ("Retry-After", "5"), ("X-Rate", "1")]))
        XCTAssertNil(read([("RateLimit-Policy", "\"default\";q=100;w=60")]), "a policy alone says nothing is spent")
    }

    // MARK: the IETF fields

    func testStructuredRateLimit() {
        XCTAssertEqual(read([("RateLimit", "\"default\";r=0;t=30")]), budget(0, 30))
        XCTAssertEqual(read([("ratelimit", "\"default\";r=50;t=7")]), budget(50, 7))
        XCTAssertEqual(read([("RateLimit", "default;r=3;t=1")]), budget(3, 1), "a token as the policy's name")
        XCTAssertTrue(read([("RateLimit", "\"default\";r=0;t=30")])!.isSpent)
    }

    func testStructuredListTakesThePolicyWithLeastLeft() {
        XCTAssertEqual(read([("RateLimit", "\"burst\";r=5;t=1, \"day\";r=0;t=3600")]), budget(0, 3600))
        // Split over two lines, as a list may be.
        XCTAssertEqual(read([("RateLimit", "\"burst\";r=0;t=2"), ("RateLimit", "\"day\";r=0;t=90")]), budget(0, 90),
                       "both spent: the later reset")
        XCTAssertEqual(read([("RateLimit", "\"a;b,c\";r=1;t=4, \"d\";r=9;t=1")]), budget(1, 4),
                       "separators inside a quoted name")
    }

    func testPolicyWindowWhenTheResetIsMissing() {
        XCTAssertEqual(read([("RateLimit", "\"default\";r=0"), ("RateLimit-Policy", "\"default\";q=100;w=60")]),
                       budget(0, 60, limit: 100), "the policy's quota is the window's limit")
        XCTAssertEqual(read([("RateLimit", "\"default\";r=5;t=9"), ("RateLimit-Policy", "\"default\";q=100;w=60")]),
                       budget(5, 9, limit: 100))
        XCTAssertEqual(read([("RateLimit", "\"default\";r=0"), ("RateLimit-Policy", "\"other\";q=100;w=60")]), budget(0, nil),
                       "another policy's window is not this one's")
    }

    func testEarlierDraftsDictionary() {
        XCTAssertEqual(read([("RateLimit", "limit=100, remaining=0, reset=30")]), budget(0, 30, limit: 100))
        XCTAssertEqual(read([("RateLimit", "limit=10, remaining=4, reset=2")]), budget(4, 2, limit: 10))
    }

    func testOlderSeparateFields() {
        XCTAssertEqual(read([("RateLimit-Limit", "100"), ("RateLimit-Remaining", "0"), ("RateLimit-Reset", "12")]),
                       budget(0, 12, limit: 100))
        XCTAssertEqual(read([("RateLimit-Remaining", "0")]), budget(0, nil), "no reset: spent, but until when is unknown")
    }

    // MARK: X-RateLimit (GitHub and many more)

    func testXRateLimitSeconds() {
        XCTAssertEqual(read([("X-RateLimit-Remaining", "0"), ("X-RateLimit-Reset", "30")]), budget(0, 30))
        XCTAssertEqual(read([("x-ratelimit-remaining", "59"), ("x-ratelimit-reset", "2.5")]), budget(59, 2.5))
    }

    func testXRateLimitUnixTime() {
        let reset = now.timeIntervalSince1970 + 1800
        XCTAssertEqual(read([("X-RateLimit-Limit", "5000"), ("X-RateLimit-Remaining", "0"),
                             ("X-RateLimit-Reset", String(Int(reset)))]), budget(0, 1800, limit: 5000))
        XCTAssertEqual(read([("X-RateLimit-Remaining", "0"), ("X-RateLimit-Reset", String(Int(reset - 3600)))]), budget(0, 0),
                       "a reset in the past: nothing to wait for")
        XCTAssertEqual(read([("X-RateLimit-Remaining", "0"), ("X-RateLimit-Reset", "1000000000")]), budget(0, 1_000_000_000),
                       "10^9 itself is still seconds")
    }

    // MARK: x-ratelimit-*-requests (OpenAI)

    func testRequestsWithDurations() {
        XCTAssertEqual(read([("x-ratelimit-limit-requests", "500"), ("x-ratelimit-remaining-requests", "0"),
                             ("x-ratelimit-reset-requests", "6m0s")]), budget(0, 360, limit: 500))
        XCTAssertEqual(read([("x-ratelimit-remaining-requests", "0"), ("x-ratelimit-reset-requests", "1s")]), budget(0, 1))
        let short = read([("x-ratelimit-remaining-requests", "0"), ("x-ratelimit-reset-requests", "250ms")])
        XCTAssertEqual(short?.resetSeconds ?? -1, 0.25, accuracy: 1e-12)
        XCTAssertEqual(read([("x-ratelimit-remaining-requests", "12"), ("x-ratelimit-reset-requests", "1h2m3.5s")]),
                       budget(12, 3723.5))
    }

    func testDurations() {
        let cases: [(String, Double?)] = [
            ("1s", 1), ("6m0s", 360), ("250ms", 0.25), ("1.5s", 1.5), ("2h", 7200), ("20us", 0.00002), ("20µs", 0.00002),
            ("100ns", 1e-7), ("17", 17), ("0s", 0), ("", nil), ("s", nil), ("5x", nil), ("-1s", nil), ("1s2", nil),
        ]
        for (text, want) in cases {
            let got = ServerRateLimit.duration(text)
            if let want {
                XCTAssertEqual(got ?? -1, want, accuracy: 1e-12, text)
            } else {
                XCTAssertNil(got, text)
            }
        }
    }

    // MARK: several forms, bad values

    func testTheFormWithLeastLeftCounts() {
        let headers = [("X-RateLimit-Remaining", "10"), ("X-RateLimit-Reset", "5"),
                       ("x-ratelimit-remaining-requests", "0"), ("x-ratelimit-reset-requests", "2s")]
        XCTAssertEqual(read(headers), budget(0, 2))
    }

    func testMalformedValuesAreIgnored() {
        XCTAssertNil(read([("X-RateLimit-Remaining", "none"), ("X-RateLimit-Reset", "5")]))
        XCTAssertEqual(read([("X-RateLimit-Remaining", "0"), ("X-RateLimit-Reset", "soon")]), budget(0, nil))
        XCTAssertEqual(read([("X-RateLimit-Remaining", "0"), ("X-RateLimit-Reset", "-5")]), budget(0, nil))
        XCTAssertNil(read([("RateLimit", "garbage;;;,,")]))
        XCTAssertEqual(read([("X-RateLimit-Remaining", "-3"), ("X-RateLimit-Reset", "1")]), budget(0, 1), "below zero is spent")
    }
}
