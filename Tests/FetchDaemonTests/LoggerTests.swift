import XCTest

@testable import FetchDaemon

/// What the diagnostic log prints: one line per message, escaped, URLs redacted; and how
/// often a repeated failure is said.
final class LoggerTests: XCTestCase {
    func testEscapingTable() {
        let cases: [(String, String)] = [
            ("plain text", "plain text"),
            ("a\nb", "a\\nb"),
            ("a\r\nb\tc", "a\\r\\nb\\tc"),
            ("esc \u{1B}[31mred", "esc \\u001B[31mred"),
            ("nul \u{0} bel \u{7} del \u{7F}", "nul \\u0000 bel \\u0007 del \\u007F"),
            ("c1 \u{9B}2J", "c1 \\u009B2J"),
            ("separators \u{2028}\u{2029}", "separators \\u2028\\u2029"),
            ("back\\slash", "back\\\\slash"),
            ("Grüße 日本 😀", "Grüße 日本 😀"),
            ("invalid \(String(decoding: [0xFF, 0xFE], as: UTF8.self))", "invalid \u{FFFD}\u{FFFD}"),
            ("", ""),
        ]
        for (message, expected) in cases {
            XCTAssertEqual(Logger.escaped(message), expected, message.debugDescription)
        }
    }

    func testALineIsRedactedThenEscaped() {
        XCTAssertEqual(Logger.line("job a\nb: GET http://u:pw@h/?sig=S\nforged"),
                       "job a\\nb: GET http://u:%3Credacted%3E@h/?sig=%3Credacted%3E\\nforged")
    }

    func testThrottleSaysTheFirstThenOncePerInterval() {
        let clock = ContinuousClock()
        let start = clock.now
        var throttle = LogThrottle<ContinuousClock.Instant>(interval: .seconds(10))
        XCTAssertEqual(throttle.shouldLog(at: start), 0)
        XCTAssertNil(throttle.shouldLog(at: start + .milliseconds(100)))
        XCTAssertNil(throttle.shouldLog(at: start + .seconds(9)))
        XCTAssertEqual(throttle.shouldLog(at: start + .seconds(10)), 2, "two went unsaid")
        XCTAssertNil(throttle.shouldLog(at: start + .seconds(11)))
        XCTAssertEqual(throttle.shouldLog(at: start + .seconds(60)), 1)
    }
}
