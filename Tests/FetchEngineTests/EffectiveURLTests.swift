@testable import FetchEngine
import XCTest

/// The effective URL libcurl reports is read as the request's own string when it is the same
/// text, and as its own text otherwise (a redirect, a normalized URL).
final class EffectiveURLTests: XCTestCase {
    func testTheSameTextIsTheRequestsOwnAndAnyOtherIsRead() {
        let request = "http://127.0.0.1:8080/a/b?c=d"
        XCTAssertEqual(request.withCString { Transfer.text($0, reusing: request) }, request)
        XCTAssertEqual("http://127.0.0.1:8080/a/b?c=e".withCString { Transfer.text($0, reusing: request) },
                       "http://127.0.0.1:8080/a/b?c=e", "same length, one byte apart")
        XCTAssertEqual("http://127.0.0.1:8080/".withCString { Transfer.text($0, reusing: request) }, "http://127.0.0.1:8080/")
        XCTAssertEqual("http://127.0.0.1:8080/a/b?c=dd".withCString { Transfer.text($0, reusing: request) },
                       "http://127.0.0.1:8080/a/b?c=dd", "the request's text is a prefix")
        XCTAssertEqual("".withCString { Transfer.text($0, reusing: "") }, "")
        XCTAssertEqual("x".withCString { Transfer.text($0, reusing: "") }, "x")
    }
}
