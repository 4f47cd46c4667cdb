import XCTest

@testable import FetchDaemon

/// `--redis` URLs read as redis-cli reads them: a user name is an ACL user, sent with the
/// password; a password alone (or after an empty user name) is the default user's; the
/// password never shows.
final class RedisURLTests: XCTestCase {
    func testUserAndPasswordAuthenticateAsThatUser() throws {
        let u = try RedisURL("redis://fetchd:pa%40ss@10.0.0.5:6380/3")
        XCTAssertEqual(u.user, "fetchd")
        XCTAssertEqual(u.password, "pa@ss")
        XCTAssertEqual(u.authCommand, ["AUTH", "fetchd", "pa@ss"])
        XCTAssertEqual(u.description, "redis://fetchd:***@10.0.0.5:6380/3")
    }

    func testPasswordAloneIsTheDefaultUser() throws {
        XCTAssertEqual(try RedisURL("redis://:pw@host").authCommand, ["AUTH", "pw"])
        XCTAssertNil(try RedisURL("redis://:pw@host").user, "an empty user name is none")
        XCTAssertEqual(try RedisURL("redis://pw@host").authCommand, ["AUTH", "pw"], "no colon: the password, as redis-cli reads it")
        XCTAssertNil(try RedisURL("redis://host").authCommand)
    }

    func testUnixSocketTakesAUser() throws {
        let u = try RedisURL("unix:///run/redis.sock?db=2&user=app&password=x%26y")
        XCTAssertEqual(u.authCommand, ["AUTH", "app", "x&y"])
        XCTAssertEqual(u.description, "unix:///run/redis.sock?db=2 (user app, with a password)")
        XCTAssertThrowsError(try RedisURL("unix:///run/redis.sock?name=app"))
    }

    func testPasswordNeverShown() throws {
        for text in ["redis://u%3Ax:secret-1@h/0", "redis://:secret-1@h", "unix:///r.sock?password=secret-1"] {
            XCTAssertFalse(try RedisURL(text).description.contains("secret"), text)
        }
        XCTAssertEqual(try RedisURL("redis://u%3Ax:secret-1@h/0").description, "redis://u%3Ax:***@h:6379/0")
    }
}
