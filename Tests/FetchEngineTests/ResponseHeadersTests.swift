import XCTest
@testable import FetchEngine

final class ResponseHeadersTests: XCTestCase {
    private func appendBytes(_ headers: inout ResponseHeaders, _ name: [UInt8], _ value: [UInt8]) {
        name.withUnsafeBufferPointer { n in value.withUnsafeBufferPointer { v in headers.append(name: n, value: v) } }
    }

    func testHeadersFromBytesReadBackInOrderWithTheirCase() {
        var headers = ResponseHeaders()
        appendBytes(&headers, Array("Content-Type".utf8), Array("text/plain".utf8))
        appendBytes(&headers, Array("ETag".utf8), Array("\"abc\"".utf8))
        appendBytes(&headers, Array("X-Empty".utf8), [])
        XCTAssertEqual(headers.count, 3)
        XCTAssertEqual(Array(headers), [HTTPHeader("Content-Type", "text/plain"), HTTPHeader("ETag", "\"abc\""),
                                        HTTPHeader("X-Empty", "")])
        XCTAssertEqual(headers, ResponseHeaders(Array(headers)))
        XCTAssertNotEqual(headers, [HTTPHeader("Content-Type", "text/plain")])
        XCTAssertNotEqual(ResponseHeaders([HTTPHeader("A", "b")]), ResponseHeaders([HTTPHeader("a", "b")]))
    }

    func testLastNamedMatchesWithoutCaseAndTakesTheLast() {
        let headers: ResponseHeaders = [HTTPHeader("Set-Cookie", "a=1"), HTTPHeader("Retry-After", "5"),
                                        HTTPHeader("set-cookie", "b=2")]
        XCTAssertEqual(headers.last(named: "SET-COOKIE"), "b=2")
        XCTAssertEqual(headers.last(named: "retry-after"), "5")
        XCTAssertNil(headers.last(named: "retry-afte"))
        XCTAssertTrue(headers.contains(named: "Set-cookie"))
        XCTAssertFalse(headers.contains(named: "Location"))
        // Only letters fold: "[" (0x5B) is not "{" (0x7B) without case.
        XCTAssertFalse(ResponseHeaders([HTTPHeader("x[", "1")]).contains(named: "X{"))
    }

    func testInvalidUTF8IsRepairedWhenReadAsText() {
        var headers = ResponseHeaders()
        appendBytes(&headers, Array("X-Bytes".utf8), [0x61, 0xFF, 0x62])
        XCTAssertEqual(headers[0].value, "a\u{FFFD}b")
        XCTAssertEqual(headers.last(named: "x-bytes"), "a\u{FFFD}b")
    }

    func testRemoveAllStartsAgain() {
        var headers: ResponseHeaders = [HTTPHeader("Location", "/a")]
        headers.removeAll(keepingCapacity: true)
        XCTAssertTrue(headers.isEmpty)
        headers.append(HTTPHeader("Server", "nginx"))
        XCTAssertEqual(Array(headers), [HTTPHeader("Server", "nginx")])
    }
}
