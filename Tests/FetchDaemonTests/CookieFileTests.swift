import FetchEngine
import Foundation
import JSONRPC
import XCTest

@testable import FetchDaemon

final class CookieFileTests: XCTestCase {
    func testParseReportsAndSkipsMalformedLines() {
        let text = """
            # Netscape HTTP Cookie File

            .example.com\tTRUE\t/\tFALSE\t2000000000\tgood\t1
            this line is broken
            host.org\tFALSE\t/\tMAYBE\t2000000000\tbad\t2
            #HttpOnly_host.org\tFALSE\t/p\tTRUE\t2000000000\talso\t3
            """
        let contents = CookieFile.parse(text)
        XCTAssertEqual(contents.cookies.map(\.name), ["good", "also"])
        XCTAssertEqual(contents.problems.count, 2)
        XCTAssertTrue(contents.problems[0].hasPrefix("line 4:"), contents.problems[0])
        XCTAssertTrue(contents.problems[1].hasPrefix("line 5:"), contents.problems[1])
    }

    func testRenderKeepsOnlyPersistentLiveCookies() {
        let now: Int64 = 1_700_000_000
        let cookies = [
            Cookie(name: "persist", value: "1", domain: "b.org", expires: now + 100),
            Cookie(name: "session", value: "1", domain: "b.org", expires: nil),
            Cookie(name: "expired", value: "1", domain: "b.org", expires: now - 1),
            Cookie(name: "first", value: "1", domain: "a.org", expires: now + 100, hostOnly: false),
        ]
        let text = CookieFile.render(cookies, now: now)
        XCTAssertTrue(text.hasPrefix("# Netscape HTTP Cookie File\n"))
        let lines = text.split(separator: "\n").filter { !$0.hasPrefix("#") }
        XCTAssertEqual(lines, [".a.org\tTRUE\t/\tFALSE\t1700000100\tfirst\t1", "b.org\tFALSE\t/\tFALSE\t1700000100\tpersist\t1"])
        XCTAssertEqual(CookieFile.parse(text).problems, [])
    }

    func testWriteIsAtomicAndPrivate() throws {
        let directory = NSTemporaryDirectory() + "fetchd-cookiefile-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/cookies.txt"
        try CookieFile.write("old\n", to: path)
        try CookieFile.write("new\n", to: path)
        XCTAssertEqual(try CookieFile.read(path), "new\n")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: directory), ["cookies.txt"], "no temporary file left")
        let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
        XCTAssertEqual(mode, 0o600)
        XCTAssertNil(try CookieFile.read(directory + "/missing.txt"))
        XCTAssertThrowsError(try CookieFile.write("x", to: directory + "/no/such/dir/c.txt"))
    }
}

final class CookieFileOptionTests: XCTestCase {
    func testCookieFileOptionIsMadeAbsolute() throws {
        guard case .run(let options) = try DaemonOptions.parse(["--cookie-file", "jar/cookies.txt"]) else {
            return XCTFail("expected run")
        }
        XCTAssertEqual(options.cookieFile, FileManager.default.currentDirectoryPath + "/jar/cookies.txt")
        XCTAssertTrue(DaemonOptions.helpText.contains("--cookie-file"))
        XCTAssertThrowsError(try DaemonOptions.parse(["--cookie-file"]))
    }
}

final class CookieParamsTests: XCTestCase {
    private func field(_ value: JSONValue) -> String? {
        do {
            _ = try CookieParams.cookie(value, field: "cookies[0]")
            return nil
        } catch {
            return error.data?["field"]?.stringValue
        }
    }

    func testCookieFromURLIsHostOnlyWithTheDefaultPath() throws {
        let cookie = try CookieParams.cookie(["name": "a", "value": "1", "url": "https://Example.com/dir/page"], field: "c")
        XCTAssertEqual(cookie, Cookie(name: "a", value: "1", domain: "example.com", path: "/dir", expires: nil,
                                      secure: false, httpOnly: false, hostOnly: true))
    }

    func testCookieWithDomainIsADomainCookie() throws {
        let cookie = try CookieParams.cookie(["name": "a", "value": "1", "domain": ".Example.com", "expires": 2_000_000_000,
                                              "secure": true, "httpOnly": true], field: "c")
        XCTAssertEqual(cookie.domain, "example.com")
        XCTAssertFalse(cookie.hostOnly)
        XCTAssertEqual(cookie.expires, 2_000_000_000)
        XCTAssertEqual(cookie.path, "/")
    }

    func testBadCookiesNameTheirField() {
        XCTAssertEqual(field(["value": "1", "domain": "h.org"]), "cookies[0].name")
        XCTAssertEqual(field(["name": "a b", "value": "1", "domain": "h.org"]), "cookies[0].name")
        XCTAssertEqual(field(["name": "a", "value": "x;y", "domain": "h.org"]), "cookies[0].value")
        XCTAssertEqual(field(["name": "a", "value": "1"]), "cookies[0].url")
        XCTAssertEqual(field(["name": "a", "value": "1", "url": "ftp://h.org/"]), "cookies[0].url")
        XCTAssertEqual(field(["name": "a", "value": "1", "url": "http://h.org/", "domain": "other.org"]), "cookies[0].domain")
        XCTAssertEqual(field(["name": "a", "value": "1", "domain": "h.org", "path": "rel"]), "cookies[0].path")
        XCTAssertEqual(field(["name": "a", "value": "1", "domain": "h.org", "expires": "tomorrow"]), "cookies[0].expires")
        XCTAssertEqual(field(["name": "a", "value": "1", "domain": "h.org", "sameSite": "lax"]), "cookies[0].sameSite")
        XCTAssertEqual(field(["name": "a", "value": "1", "domain": "h o.org"]), "cookies[0].domain")
        XCTAssertEqual(field("a=1"), "cookies[0]")
    }
}
