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

    func testRetryStateIsKeptAndNeverGoesBackOrMakesARow() throws {
        let dir = temporaryDirectory() + "/state"
        let store = DurableStore(directory: dir, log: Logger(minimum: .error))
        var first = record("r")
        first.started = 1_700_000_000.5
        try store.save(first)
        XCTAssertEqual(store.unfinished().first?.retry, DurableStore.Retry(), "a new job: no attempt used")
        store.saveRetry(jobID: "r", DurableStore.Retry(attempts: 3, failures: 3, waited: 3.75, jitter: 0.25))
        store.saveRetry(jobID: "r", DurableStore.Retry(attempts: 2, failures: 2, waited: 1.25, jitter: 0.25))  // late
        store.saveRetry(jobID: "gone", DurableStore.Retry(attempts: 1, failures: 1))
        try store.saveSession(jobID: "r", url: "http://h/session/2")
        let again = DurableStore(directory: dir, log: Logger(minimum: .error))
        let rows = again.unfinished()
        XCTAssertEqual(rows.map(\.jobID), ["r"], "a job's retry state never makes a row")
        XCTAssertEqual(rows.first?.retry, DurableStore.Retry(attempts: 3, failures: 3, waited: 3.75, jitter: 0.25))
        XCTAssertEqual(rows.first?.started, 1_700_000_000.5)
        XCTAssertEqual(rows.first?.sessionURL, "http://h/session/2")
        // Resumed: saved again with the state it was resumed with.
        var resumed = try XCTUnwrap(rows.first)
        resumed = DurableStore.Record(jobID: "r", method: "download", params: resumed.params, restarts: 1,
                                      sessionURL: resumed.sessionURL, retry: resumed.retry, started: resumed.started)
        try again.save(resumed)
        XCTAssertEqual(again.unfinished().first?.retry.failures, 3)
        XCTAssertEqual(again.unfinished().first?.restarts, 1)
    }

    func testDeathsInARowAreCountedAndACleanStopForgetsThem() throws {
        let dir = temporaryDirectory() + "/state"
        DurableStore(directory: dir, log: Logger(minimum: .error)).stoppedCleanly()
        XCTAssertEqual(access(dir, F_OK), -1, "a clean stop without a store makes none")
        let store = DurableStore(directory: dir, log: Logger(minimum: .error))
        try store.save(record("d"))
        // Each next daemon reads it still live (the one before died), and saves it as it resumes.
        var crashes: [Int] = []
        for _ in 0..<3 {
            let next = DurableStore(directory: dir, log: Logger(minimum: .error))
            let row = try XCTUnwrap(next.unfinished().first)
            crashes.append(row.crashes)
            try next.save(row)
        }
        XCTAssertEqual(crashes, [1, 2, 3])
        let stopping = DurableStore(directory: dir, log: Logger(minimum: .error))
        stopping.stoppedCleanly()
        XCTAssertEqual(DurableStore(directory: dir, log: Logger(minimum: .error)).unfinished().first?.crashes, 0,
                       "after a clean stop the count starts again")
        XCTAssertEqual(DurableStore.maxCrashes, 5)
    }

    func testAStoreOfSchema1IsMigratedInPlace() throws {
        let dir = temporaryDirectory()
        let path = dir + "/" + DurableStore.databaseName
        do {
            // As the first schema's fetchd made it.
            let db = try SQLiteDatabase(path: path)
            try db.execute("""
                CREATE TABLE jobs (job_id TEXT PRIMARY KEY NOT NULL, method TEXT NOT NULL, params TEXT NOT NULL,
                    restarts INTEGER NOT NULL, session_url TEXT, created INTEGER NOT NULL, updated INTEGER NOT NULL);
                PRAGMA user_version = 1;
                """)
            try db.query("INSERT INTO jobs VALUES ('old', 'upload', ?, 2, 'http://h/s', 1700000000, 1700000001)",
                         [.text(#"{"url":"http://h/","jobId":"old"}"#)])
        }
        chmod(dir, 0o700)
        let store = DurableStore(directory: dir, log: Logger(minimum: .error))
        let rows = store.unfinished()
        XCTAssertEqual(rows.map(\.jobID), ["old"])
        XCTAssertEqual(rows.first?.restarts, 2)
        XCTAssertEqual(rows.first?.sessionURL, "http://h/s")
        XCTAssertEqual(rows.first?.retry, DurableStore.Retry(), "no retry state before schema 2: none used")
        XCTAssertEqual(rows.first?.started, 1_700_000_000, "its first start: when it was written down")
        XCTAssertEqual(rows.first?.crashes, 0, "rows from before schema 3 count as stopped cleanly")
        let names = try FileManager.default.contentsOfDirectory(atPath: dir)
        XCTAssertEqual(names.filter { $0.contains("corrupt") }, [], "migrated, not moved aside")
        store.saveRetry(jobID: "old", DurableStore.Retry(attempts: 1, failures: 1, waited: 1.5, jitter: 0.5))
        let check = try SQLiteDatabase(path: path)
        XCTAssertEqual(try check.query("PRAGMA user_version").first?.first, .integer(DurableStore.schemaVersion))
        XCTAssertEqual(try check.query("SELECT failures, waited FROM jobs").first, [.integer(1), .real(1.5)])
    }

    func testAStoreOfANewerSchemaIsMovedAside() throws {
        let dir = temporaryDirectory()
        do {
            let db = try SQLiteDatabase(path: dir + "/" + DurableStore.databaseName)
            try db.execute("CREATE TABLE jobs (job_id TEXT); PRAGMA user_version = 99;")
        }
        chmod(dir, 0o700)
        let store = DurableStore(directory: dir, log: Logger(minimum: .error))
        XCTAssertEqual(store.unfinished().count, 0)
        let names = try FileManager.default.contentsOfDirectory(atPath: dir)
        XCTAssertEqual(names.filter { $0.hasPrefix("jobs.db.corrupt-") }.count, 1, "\(names)")
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
