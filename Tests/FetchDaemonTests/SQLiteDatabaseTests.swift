import Glibc
import XCTest

@testable import FetchDaemon

/// The SQLite wrapper: values round-trip, a transaction that throws leaves nothing, and a
/// file that is not a database (truncated or overwritten) is refused on open.
final class SQLiteDatabaseTests: XCTestCase {
    private func temporaryPath() -> String {
        var template = Array("/tmp/fetchd-sqlite-XXXXXX".utf8CString)
        let dir = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
        addTeardownBlock { _ = system("rm -rf '\(dir)'") }
        return dir + "/test.db"
    }

    func testValuesRoundTripAndRollback() throws {
        let db = try SQLiteDatabase(path: temporaryPath())
        try db.execute("CREATE TABLE t (a INTEGER, b TEXT, c REAL, d BLOB, e)")
        try db.query("INSERT INTO t VALUES (?, ?, ?, ?, ?)", [.integer(42), .text("héllo"), .real(1.5), .blob([0, 1, 255]), .null])
        let rows = try db.query("SELECT a, b, c, d, e FROM t")
        XCTAssertEqual(rows, [[.integer(42), .text("héllo"), .real(1.5), .blob([0, 1, 255]), .null]])

        struct Boom: Error {}
        XCTAssertThrowsError(try db.transaction {
            try db.query("INSERT INTO t (a) VALUES (7)")
            throw Boom()
        })
        XCTAssertEqual(try db.query("SELECT count(*) FROM t").first?.first, .integer(1), "the rolled-back row is gone")
        try db.transaction { try db.query("DELETE FROM t") }
        XCTAssertEqual(db.changes, 1)
    }

    func testGarbageFileIsRefused() throws {
        let path = temporaryPath()
        do {
            let db = try SQLiteDatabase(path: path)
            try db.execute("CREATE TABLE t (a); INSERT INTO t VALUES (1)")
        }
        // Overwrite the header: no longer a database.
        let fd = open(path, O_WRONLY)
        XCTAssertGreaterThanOrEqual(fd, 0)
        let junk = [UInt8](repeating: 0x41, count: 4096)
        XCTAssertEqual(junk.withUnsafeBytes { pwrite(fd, $0.baseAddress, 4096, 0) }, 4096)
        close(fd)
        XCTAssertThrowsError(try SQLiteDatabase(path: path))
    }
}
