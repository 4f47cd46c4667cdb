import FetchEngine
import XCTest

final class URLEncodingTests: XCTestCase {
    func testQueryPercentEncodesEverythingButUnreserved() {
        XCTAssertEqual(URLEncoding.query([("q", "a b&c=d/é~")]), "q=a%20b%26c%3Dd%2F%C3%A9~")
        XCTAssertEqual(URLEncoding.query([("k y", "1"), ("k y", "2")]), "k%20y=1&k%20y=2")
    }

    func testFormUsesPlusForSpace() {
        XCTAssertEqual(URLEncoding.form([("name", "J. Doe+1"), ("x", "")]), "name=J.+Doe%2B1&x=")
    }

    func testAppendingQueryKeepsTheURLsOwnQueryAndFragment() {
        XCTAssertEqual(URLEncoding.appendingQuery([("a", "1")], to: "http://h/p"), "http://h/p?a=1")
        XCTAssertEqual(URLEncoding.appendingQuery([("a", "1")], to: "http://h/p?x=y"), "http://h/p?x=y&a=1")
        XCTAssertEqual(URLEncoding.appendingQuery([("a", "1")], to: "http://h/p?"), "http://h/p?a=1")
        XCTAssertEqual(URLEncoding.appendingQuery([("a", "1")], to: "http://h/p#frag"), "http://h/p?a=1#frag")
        XCTAssertEqual(URLEncoding.appendingQuery([], to: "http://h/p"), "http://h/p")
    }
}

final class RequestURLTests: XCTestCase {
    func testAcceptsHTTPAndHTTPS() throws {
        let url = try RequestURL("HTTP://Example.COM:8080/a?b")
        XCTAssertEqual(url.scheme, "http")
        XCTAssertEqual(url.host, "example.com")
        XCTAssertEqual(url.port, 8080)
        XCTAssertEqual(try RequestURL("https://example.com/").port, 443)
        XCTAssertEqual(try RequestURL("http://[::1]/").port, 80)
        XCTAssertEqual(try RequestURL("hTTpS://Example.com/").scheme, "https")
        XCTAssertEqual(try RequestURL("HTTPS://h/").port, 443)
        // Near misses of the two schemes are refused (libcurl knows none of them).
        for text in ["httpx://h/", "htt://h/", "https1://h/", "http//h/"] {
            XCTAssertThrowsError(try RequestURL(text), text)
        }
    }

    func testRefusesOtherSchemes() {
        for text in ["ftp://example.com/", "file:///etc/passwd", "gopher://x/"] {
            XCTAssertThrowsError(try RequestURL(text)) { error in
                guard case .schemeNotAllowed = error as? RequestURL.Problem else {
                    return XCTFail("\(text): \(error)")
                }
            }
        }
    }

    func testRefusesMalformedURLs() {
        for text in ["", "not a url", "http://", "example.com/no-scheme", "http://exa mple.com/", "http:///path", "HTTPS:///path"] {
            XCTAssertThrowsError(try RequestURL(text)) { error in
                guard case .malformed = error as? RequestURL.Problem else { return XCTFail("\(text): \(error)") }
            }
        }
    }

    func testPercentDecodingAsFoundationDoes() {
        XCTAssertEqual(URLEncoding.decode("a%20b%2Fc%C3%A9"), "a b/cé")
        XCTAssertEqual(URLEncoding.decode("plain"), "plain")
        XCTAssertNil(URLEncoding.decode("bad%2"), "truncated escape")
        XCTAssertNil(URLEncoding.decode("bad%zz"), "not hex")
        XCTAssertNil(URLEncoding.decode("%FF"), "not UTF-8")
    }

    func testTrimmingBlanksKeepsLineBreaksAndInnerSpaces() {
        XCTAssertEqual(" \t a b \t ".trimmingBlanks(), "a b")
        XCTAssertEqual("\na\n".trimmingBlanks(), "\na\n")
        XCTAssertEqual("   ".trimmingBlanks(), "")
        XCTAssertEqual("x"[...].trimmingBlanks(), "x")
    }
}
