@testable import FetchEngine
import CCurl
import CLinux
import XCTest

/// Netscape cookies.txt lines and RFC 6265 matching, with the clock injected; and the
/// engine's jars (libcurl's cookie engine behind a share), which need no server.
final class CookieLineTests: XCTestCase {
    private func parse(_ line: String) throws -> Cookie? {
        try Cookie.parse(netscapeLine: Substring(line))
    }

    func testHostOnlyLine() throws {
        let cookie = try XCTUnwrap(parse("example.com\tFALSE\t/a\tFALSE\t2000000000\tsid\tv1"))
        XCTAssertEqual(cookie, Cookie(name: "sid", value: "v1", domain: "example.com", path: "/a",
                                      expires: 2_000_000_000, secure: false, httpOnly: false, hostOnly: true))
    }

    func testDomainSecureHttpOnlySessionLine() throws {
        let cookie = try XCTUnwrap(parse("#HttpOnly_.Example.COM\tTRUE\t/\tTRUE\t0\tk\tv=x\r\n"))
        XCTAssertEqual(cookie.domain, "example.com")
        XCTAssertFalse(cookie.hostOnly)
        XCTAssertTrue(cookie.secure)
        XCTAssertTrue(cookie.httpOnly)
        XCTAssertNil(cookie.expires, "0 is a session cookie")
        XCTAssertEqual(cookie.value, "v=x")
    }

    func testEmptyValueAndSixFields() throws {
        XCTAssertEqual(try parse("h\tFALSE\t/\tFALSE\t5\tn\t")?.value, "")
        XCTAssertEqual(try parse("h\tFALSE\t/\tFALSE\t5\tn")?.value, "", "curl reads six fields as an empty value")
    }

    func testCommentsAndBlankLinesAreNotCookies() throws {
        XCTAssertNil(try parse("# Netscape HTTP Cookie File"))
        XCTAssertNil(try parse(""))
        XCTAssertNil(try parse("   \t "))
        XCTAssertNil(try parse("\r\n"))
    }

    func testMalformedLinesThrow() {
        let bad = [
            "just some text",
            "h\tFALSE\t/\tFALSE\t5",                     // five fields
            "h\tFALSE\t/\tFALSE\t5\tn\tv\textra",        // eight
            "h\tMAYBE\t/\tFALSE\t5\tn\tv",               // flag
            "h\tFALSE\t/\tyes\t5\tn\tv",                 // secure flag
            "h\tFALSE\t/\tFALSE\tsoon\tn\tv",            // expiry
            "h\tFALSE\t/\tFALSE\t-5\tn\tv",              // negative expiry
            "h\tFALSE\tpath\tFALSE\t5\tn\tv",            // relative path
            "h\tFALSE\t/\tFALSE\t5\t\tv",                // empty name
            "\tFALSE\t/\tFALSE\t5\tn\tv",                // empty domain
            "h\tFALSE\t/\tFALSE\t5\tn\t" + String(repeating: "x", count: 5000),
        ]
        for line in bad {
            XCTAssertThrowsError(try parse(line), line.prefix(60).description)
        }
    }

    func testFormatIsWhatCurlWrites() {
        let domain = Cookie(name: "a", value: "1", domain: "example.com", path: "/p", expires: 1_900_000_000,
                            secure: true, httpOnly: true, hostOnly: false)
        XCTAssertEqual(domain.netscapeLine, "#HttpOnly_.example.com\tTRUE\t/p\tTRUE\t1900000000\ta\t1")
        let host = Cookie(name: "b", value: "", domain: "127.0.0.1")
        XCTAssertEqual(host.netscapeLine, "127.0.0.1\tFALSE\t/\tFALSE\t0\tb\t")
    }

    func testRoundTrip() throws {
        let cookies = [
            Cookie(name: "a", value: "1", domain: ".x.org", path: "/", expires: 5, secure: false, httpOnly: false, hostOnly: false),
            Cookie(name: "b", value: "two words", domain: "y.org", path: "/deep/er", expires: nil, secure: true, httpOnly: true, hostOnly: true),
        ]
        for cookie in cookies {
            XCTAssertEqual(try parse(cookie.netscapeLine), cookie)
        }
    }
}

final class CookieMatchingTests: XCTestCase {
    let now: Int64 = 1_700_000_000

    private func target(_ url: String) throws -> CookieTarget { try CookieTarget(url: url) }

    private func names(_ jar: [Cookie], _ url: String, now: Int64? = nil) throws -> [String] {
        try jar.cookies(for: target(url), now: now ?? self.now).map(\.name)
    }

    func testHostOnlyCookieStaysOnItsHost() throws {
        let jar = [Cookie(name: "h", value: "1", domain: "example.com", hostOnly: true)]
        XCTAssertEqual(try names(jar, "http://example.com/"), ["h"])
        XCTAssertEqual(try names(jar, "http://EXAMPLE.com/x"), ["h"])
        XCTAssertEqual(try names(jar, "http://www.example.com/"), [], "host-only must not leak to subdomains")
        XCTAssertEqual(try names(jar, "http://badexample.com/"), [])
    }

    func testDomainCookieGoesToSubdomainsOnADotBoundary() throws {
        let jar = [Cookie(name: "d", value: "1", domain: "example.com", hostOnly: false)]
        XCTAssertEqual(try names(jar, "http://example.com/"), ["d"])
        XCTAssertEqual(try names(jar, "http://a.b.example.com/"), ["d"])
        XCTAssertEqual(try names(jar, "http://badexample.com/"), [])
        XCTAssertEqual(try names(jar, "http://example.com.evil.org/"), [])
    }

    func testAddressesAreNeverTailMatched() throws {
        let jar = [Cookie(name: "ip", value: "1", domain: "0.0.1", hostOnly: false)]
        XCTAssertEqual(try names(jar, "http://127.0.0.1/"), [])
        let exact = [Cookie(name: "ip", value: "1", domain: "127.0.0.1", hostOnly: false)]
        XCTAssertEqual(try names(exact, "http://127.0.0.1:8080/"), ["ip"])
    }

    func testPathMatchesOnSlashBoundaries() {
        XCTAssertTrue(Cookie.pathMatches(requestPath: "/docs", cookiePath: "/docs"))
        XCTAssertTrue(Cookie.pathMatches(requestPath: "/docs/", cookiePath: "/docs"))
        XCTAssertTrue(Cookie.pathMatches(requestPath: "/docs/a/b", cookiePath: "/docs"))
        XCTAssertTrue(Cookie.pathMatches(requestPath: "/docs/a", cookiePath: "/docs/"))
        XCTAssertTrue(Cookie.pathMatches(requestPath: "/anything", cookiePath: "/"))
        XCTAssertFalse(Cookie.pathMatches(requestPath: "/docsearch", cookiePath: "/docs"))
        XCTAssertFalse(Cookie.pathMatches(requestPath: "/doc", cookiePath: "/docs"))
        XCTAssertFalse(Cookie.pathMatches(requestPath: "/", cookiePath: "/docs"))
        XCTAssertFalse(Cookie.pathMatches(requestPath: "/Docs", cookiePath: "/docs"), "paths are case-sensitive")
    }

    func testPathOfTheURLIgnoresTheQuery() throws {
        let jar = [Cookie(name: "p", value: "1", domain: "h.org", path: "/docs")]
        XCTAssertEqual(try names(jar, "http://h.org/docs?x=/y"), ["p"])
        XCTAssertEqual(try names(jar, "http://h.org/docsearch?q=/docs"), [])
        XCTAssertEqual(try names(jar, "http://h.org"), [])
    }

    func testSecureOnlyOverHttpsOrLocalhost() throws {
        let jar = [Cookie(name: "s", value: "1", domain: "h.org", secure: true)]
        XCTAssertEqual(try names(jar, "http://h.org/"), [])
        XCTAssertEqual(try names(jar, "https://h.org/"), ["s"])
        // libcurl treats localhost as a secure context, as browsers do.
        let local = [Cookie(name: "s", value: "1", domain: "localhost", secure: true),
                     Cookie(name: "t", value: "1", domain: "127.0.0.1", secure: true)]
        XCTAssertEqual(try names(local, "http://localhost:1234/"), ["s"])
        XCTAssertEqual(try names(local, "http://127.0.0.1:1234/"), ["t"])
    }

    func testExpiryAgainstTheInjectedClock() throws {
        let jar = [Cookie(name: "e", value: "1", domain: "h.org", expires: now),
                   Cookie(name: "session", value: "1", domain: "h.org", expires: nil)]
        XCTAssertEqual(try names(jar, "http://h.org/", now: now - 10), ["session", "e"], "longer names first")
        XCTAssertEqual(try names(jar, "http://h.org/", now: now), ["session", "e"], "expires < now is expired, as libcurl has it")
        XCTAssertEqual(try names(jar, "http://h.org/", now: now + 1), ["session"])
    }

    func testOrderLongerPathsFirst() throws {
        let jar = [Cookie(name: "root", value: "1", domain: "h.org", path: "/"),
                   Cookie(name: "deep", value: "1", domain: "h.org", path: "/a/b"),
                   Cookie(name: "mid", value: "1", domain: "h.org", path: "/a")]
        XCTAssertEqual(try names(jar, "http://h.org/a/b/c"), ["deep", "mid", "root"])
        let samePath = [Cookie(name: "b", value: "1", domain: "h.org", hostOnly: false),
                        Cookie(name: "long", value: "1", domain: "h.org", hostOnly: false),
                        Cookie(name: "a", value: "1", domain: "h.org", hostOnly: false),
                        Cookie(name: "dom", value: "1", domain: "w.h.org")]
        XCTAssertEqual(try names(samePath, "http://w.h.org/"), ["dom", "long", "a", "b"])
    }

    func testDefaultPathAndDomainFilter() throws {
        XCTAssertEqual(try target("http://h.org/a/b/c?x").defaultCookiePath, "/a/b")
        XCTAssertEqual(try target("http://h.org/a").defaultCookiePath, "/")
        XCTAssertEqual(try target("http://h.org").defaultCookiePath, "/")
        let cookie = Cookie(name: "x", value: "", domain: "www.example.com")
        XCTAssertTrue(cookie.isWithin(domain: "example.com"))
        XCTAssertTrue(cookie.isWithin(domain: ".WWW.example.com"))
        XCTAssertFalse(cookie.isWithin(domain: "ample.com"))
    }
}

/// The jars on libcurl's cookie engine: stored through CURLOPT_COOKIELIST, read back
/// through CURLINFO_COOKIELIST, on the engine thread.
final class CookieJarTests: XCTestCase {
    private let future: Int64 = 4_000_000_000

    func testStoreReadClearAndIsolation() async {
        let engine = HTTPEngine()
        defer { engine.shutdown() }
        let a = Cookie(name: "a", value: "1", domain: "example.com", path: "/", expires: future)
        let b = Cookie(name: "b", value: "2", domain: "www.other.org", path: "/x", expires: nil,
                       secure: true, httpOnly: true, hostOnly: false)
        let stored = await engine.store([a, b], inJar: "one")
        XCTAssertEqual(stored, 2)
        let held = await engine.cookies(inJar: "one")
        XCTAssertEqual(Set(held.map(\.netscapeLine)), Set([a.netscapeLine, b.netscapeLine]))
        let otherJar = await engine.cookies(inJar: "two")
        XCTAssertEqual(otherJar, [], "named jars are separate")

        // Same name, domain and path: replaced, not added.
        var newer = a
        newer.value = "updated"
        _ = await engine.store([newer], inJar: "one")
        let replaced = await engine.cookies(inJar: "one")
        XCTAssertEqual(replaced.filter { $0.name == "a" }.map(\.value), ["updated"])

        let removedOther = await engine.clearCookies(inJar: "one", domain: "other.org")
        XCTAssertEqual(removedOther, 1)
        let left = await engine.cookies(inJar: "one")
        XCTAssertEqual(left.map(\.name), ["a"])
        let removedAll = await engine.clearCookies(inJar: "one", domain: nil)
        XCTAssertEqual(removedAll, 1)
        let none = await engine.cookies(inJar: "one")
        XCTAssertEqual(none, [])
    }

    func testExpiredAndRefusedCookiesAreNotStored() async {
        let engine = HTTPEngine()
        defer { engine.shutdown() }
        let live = Cookie(name: "live", value: "1", domain: "h.org", expires: future)
        _ = await engine.store([live], inJar: "default")
        // An expiry in the past deletes the cookie, as Max-Age=0 does.
        var dead = live
        dead.expires = 1
        let storedDead = await engine.store([dead], inJar: "default")
        XCTAssertEqual(storedDead, 0)
        let afterDelete = await engine.cookies(inJar: "default")
        XCTAssertEqual(afterDelete, [])
        // libcurl enforces the __Host- prefix rules: Secure, host-only, path "/".
        let badHost = Cookie(name: "__Host-x", value: "1", domain: "h.org", expires: future, secure: true, hostOnly: false)
        let storedBad = await engine.store([badHost], inJar: "default")
        XCTAssertEqual(storedBad, 0)
    }

    /// A pooled handle is attached to a jar for each request and reset after it, as the
    /// engine does: the heap must not grow with the requests. libcurl 7.88's curl_easy_reset
    /// loses the handle's cookie file list: 64 bytes per request (4,500 here: 288 KB).
    func testResettingAPooledHandleDoesNotGrowTheHeap() throws {
        let jars = CookieJars()
        defer { jars.close() }
        let easy = try XCTUnwrap(curl_easy_init())
        defer { curl_easy_cleanup(easy) }
        func serve(jar: String?) {   // what EngineLoop.begin and end do to a pooled handle
            jars.attach(easy, jar: jar)
            CookieJars.reset(easy)
        }
        for _ in 0..<100 { serve(jar: "default") }   // the share's and the handle's first allocations
        let before = fetchd_heap_in_use()
        for round in 0..<5_000 { serve(jar: round % 10 == 9 ? nil : "default") }
        let grown = Int(fetchd_heap_in_use()) - Int(before)
        XCTAssertLessThan(grown, 64 << 10, "heap grew by \(grown) bytes over 5,000 requests")
    }

    func testObserverHearsEdits() async {
        let engine = HTTPEngine()
        defer { engine.shutdown() }
        let heard = expectation(description: "observer called")
        heard.assertForOverFulfill = false
        engine.observeCookieChanges { jar in
            if jar == "watched" { heard.fulfill() }
        }
        _ = await engine.store([Cookie(name: "n", value: "v", domain: "h.org")], inJar: "watched")
        await fulfillment(of: [heard], timeout: 5)
    }
}
