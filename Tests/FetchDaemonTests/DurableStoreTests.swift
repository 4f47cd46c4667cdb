@testable import FetchDaemon
import Foundation
import Glibc
import JSONRPC
import XCTest

final class DurableStoreTests: XCTestCase {
    private func temporaryDirectory() -> String {
        var template = Array("/tmp/fetchd-durable-XXXXXX".utf8CString)
        let dir = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
        addTeardownBlock { _ = system("rm -rf '\(dir)'") }
        return dir
    }

    private func record(_ id: String, restarts: Int = 0, session: String? = nil) -> DurableStore.Record {
        DurableStore.Record(jobID: id, method: "download", params: ["url": "http://h/", "jobId": .string(id)],
                            restarts: restarts, sessionURL: session)
    }

    func testCredentialHeadersAreNeverStored() throws {
        let params: JSONValue = ["url": "http://h/?sig=kept", "headers": [
            "authorization": "Bearer x", "Cookie": "a=b", "Proxy-Authorization": "Basic y", "X-Api-Key": "k",
            "X-Auth-Token": "t", "X-Amz-Security-Token": "s", "Client-Secret": "c", "X-Keep": "1", "Accept": "a/b",
        ]]
        let stored = try DurableStore.storable(params, jobID: "j1")
        XCTAssertEqual(stored["headers"], ["X-Keep": "1", "Accept": "a/b"])
        XCTAssertEqual(stored["jobId"], "j1")
        XCTAssertEqual(stored["url"], "http://h/?sig=kept", "the query stays: it is the request")
    }

    func testPasswordsInURLsAreRefused() throws {
        for (field, params) in [("url", ["url": "https://u:pw@h/x"] as JSONValue),
                                ("proxy", ["url": "https://h/x", "proxy": "http://u:pw@proxy:3128"] as JSONValue)] {
            XCTAssertThrowsError(try DurableStore.storable(params, jobID: "j")) { error in
                XCTAssertEqual((error as? RPCError)?.data?["field"], .string(field))
                XCTAssertFalse("\(error)".contains("pw@"), "\(error)")
            }
        }
        // A user without a password, and a proxy without credentials, are not secrets.
        XCTAssertNoThrow(try DurableStore.storable(["url": "https://u@h/x", "proxy": "http://proxy:3128"], jobID: "j"))
    }

    func testRowsRoundTripInOrderAndLeave() throws {
        let dir = temporaryDirectory() + "/state"
        let store = DurableStore(directory: dir, log: Logger(minimum: .error))
        XCTAssertEqual(store.unfinished().count, 0)
        XCTAssertEqual(access(dir, F_OK), -1, "reading an absent store makes nothing")
        try store.save(record("b"))
        try store.save(record("a"))
        try store.save(record("b", restarts: 2, session: "http://h/session/1"))  // an update keeps its place
        var info = stat()
        XCTAssertEqual(stat(store.databasePath, &info), 0)
        XCTAssertEqual(info.st_mode & 0o777, 0o600)
        let again = DurableStore(directory: dir, log: Logger(minimum: .error))  // as the next daemon
        let rows = again.unfinished()
        XCTAssertEqual(rows.map(\.jobID), ["b", "a"])
        XCTAssertEqual(rows.first?.restarts, 2)
        XCTAssertEqual(rows.first?.sessionURL, "http://h/session/1")
        XCTAssertEqual(rows.first?.params["jobId"], "b")
        again.remove(jobID: "b")
        XCTAssertEqual(DurableStore(directory: dir, log: Logger(minimum: .error)).unfinished().map(\.jobID), ["a"])
    }

    func testDamagedStoreIsMovedAsideAndReplaced() throws {
        let dir = temporaryDirectory()
        let store = DurableStore(directory: dir, log: Logger(minimum: .error))
        let garbage = Array(repeating: UInt8(ascii: "z"), count: 5000)
        let fd = open(store.databasePath, O_WRONLY | O_CREAT, 0o600)
        XCTAssertEqual(garbage.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }, 5000)
        close(fd)
        XCTAssertEqual(store.unfinished().count, 0)
        let names = try FileManager.default.contentsOfDirectory(atPath: dir)
        XCTAssertEqual(names.filter { $0.hasPrefix("jobs.db.corrupt-") }.count, 1, "\(names)")
        try store.save(record("new"))
        XCTAssertEqual(DurableStore(directory: dir, log: Logger(minimum: .error)).unfinished().map(\.jobID), ["new"])
    }
}
