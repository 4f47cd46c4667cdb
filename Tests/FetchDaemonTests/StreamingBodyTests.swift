@testable import FetchDaemon
import FetchEngine
import XCTest

/// The pure rules of streamed bodies: which heads may stream (no stage could still retry,
/// follow or revalidate them), and which line a read's descriptors belong to.
final class StreamingBodyTests: XCTestCase {
    func testFinalHeads() {
        let get = RetryPolicy.defaults(for: "GET")
        for status in [200, 201, 204, 206, 400, 403, 404, 410] {
            XCTAssertTrue(StreamCommit.isFinal(status: status, policy: get), "\(status)")
        }
        // Interim, redirects (the daemon may follow them), 304 (the cache's), 401 and 407 (a
        // credential again), 5xx (stale-if-error) and the statuses the policy retries.
        for status in [100, 101, 301, 302, 304, 307, 401, 407, 408, 429, 500, 502, 503, 504, 599] {
            XCTAssertFalse(StreamCommit.isFinal(status: status, policy: get), "\(status)")
        }
    }

    func testRetryPolicyDecides() {
        var policy = RetryPolicy.defaults(for: "GET")
        policy.statuses = [404]
        XCTAssertFalse(StreamCommit.isFinal(status: 404, policy: policy))
        XCTAssertTrue(StreamCommit.isFinal(status: 429, policy: policy))
        policy.enabled = false
        XCTAssertTrue(StreamCommit.isFinal(status: 404, policy: policy))
        // Without retries a 503 still waits: the cache may serve a stale answer instead.
        XCTAssertFalse(StreamCommit.isFinal(status: 503, policy: policy))
    }

    private func start(_ text: String, continuing: Bool = false) -> Int {
        Array(text.utf8).withUnsafeBytes { Connection.lastLineStart($0, continuingLine: continuing) }
    }

    func testDescriptorsGoToTheLastLineThatBeginsInTheRead() {
        XCTAssertEqual(start("{\"a\":1}\n"), 0)
        XCTAssertEqual(start("{\"a\":1}\n{\"b\":2}\n"), 8)
        XCTAssertEqual(start("{\"a\":1}\n{\"b\""), 8)
        // The read continues a line begun before: the one that begins after it.
        XCTAssertEqual(start("\"x\"}\n{\"b\":2}\n", continuing: true), 5)
        // No line begins in it: they go to the next one.
        XCTAssertEqual(start("more of a line", continuing: true), 14)
        XCTAssertEqual(start("end of a line\n", continuing: true), 14)
        XCTAssertEqual(start("", continuing: false), 0)
    }
}
