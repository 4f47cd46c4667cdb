import CSQLite
import FetchEngine
import Glibc

/// One SQLite database file, used by one owner at a time (the durable-job store, the HTTP
/// cache's index). SQLite from Debian's libsqlite3-dev does the crash safety: WAL journal,
/// `synchronous=FULL` where a commit must survive power loss, `integrity_check` on open.
/// Not thread-safe by itself: the owner serialises calls (a lock or one thread).
final class SQLiteDatabase {
    struct Failure: Error, CustomStringConvertible {
        let code: Int32
        let message: String
        var description: String { "sqlite \(code): \(message)" }
        /// The file is damaged or not a database (SQLITE_CORRUPT, SQLITE_NOTADB, SQLITE_FORMAT),
        /// as opposed to busy, read-only or out of space: the owner moves such a file aside.
        var isDamage: Bool {
            let primary = code & 0xff
            return primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB || primary == SQLITE_FORMAT
        }
    }

    /// A value bound to or read from a statement.
    enum Value: Sendable, Equatable {
        case null
        case integer(Int64)
        case real(Double)
        case text(String)
        case blob([UInt8])

        var integer: Int64? { if case .integer(let v) = self { return v } else { return nil } }
        var text: String? { if case .text(let v) = self { return v } else { return nil } }
        var real: Double? {
            switch self {
            case .real(let v): return v
            case .integer(let v): return Double(v)
            default: return nil
            }
        }
        var blob: [UInt8]? { if case .blob(let v) = self { return v } else { return nil } }
    }

    private var handle: OpaquePointer?
    let path: String

    /// Opens (creating) the database and checks it. Throws when the file is not a database or
    /// fails `PRAGMA quick_check`: the caller moves it aside and opens a new one. The file and
    /// its -wal and -shm are the owner's alone (`makePrivate`).
    init(path: String, synchronousFull: Bool = true) throws {
        self.path = path
        Self.makePrivate(path)
        var db: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW
        let rc = sqlite3_open_v2(path, &db, flags, nil)
        handle = db
        guard rc == SQLITE_OK else {
            let failure = Failure(code: rc, message: db.map { String(cString: sqlite3_errmsg($0)) } ?? "cannot open")
            sqlite3_close_v2(db)
            handle = nil
            throw failure
        }
        sqlite3_busy_timeout(db, 2_000)
        do {
            let check = try query("PRAGMA quick_check")
            guard check.first?.first?.text == "ok" else {
                throw Failure(code: SQLITE_CORRUPT, message: "quick_check: \(check.first?.first?.text ?? "no answer")")
            }
            try execute("PRAGMA journal_mode=WAL")
            try execute(synchronousFull ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL")
        } catch {
            sqlite3_close_v2(db)
            handle = nil
            throw error
        }
    }

    deinit { sqlite3_close_v2(handle) }

    /// Creates the file 0600 before SQLite opens it, whatever the umask: SQLite would make it
    /// 0644 & ~umask, and it gives the -wal and -shm files it makes the main file's mode. The
    /// stores hold URLs with their tokens. A file of ours made wider before (an older daemon)
    /// is narrowed to the owner, its -wal, -shm and -journal too. Never through a link, never
    /// a wait on a FIFO (O_NOFOLLOW, O_NONBLOCK); anything but a regular file is left to
    /// SQLite to refuse.
    private static func makePrivate(_ path: String) {
        let created = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0o600)
        if created >= 0 {
            narrow(created)
            close(created)
        }
        for suffix in ["-wal", "-shm", "-journal"] {
            let fd = open(path + suffix, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)
            guard fd >= 0 else { continue }
            narrow(fd)
            close(fd)
        }
    }

    private static func narrow(_ fd: Int32) {
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_uid == geteuid(), info.st_mode & 0o077 != 0 else { return }
        fchmod(fd, info.st_mode & 0o700)
    }

    /// Runs one or more statements that take no parameters.
    func execute(_ sql: String) throws {
        HTTPEngine.assertNotOnAnEngineThread()
        var message: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(handle, sql, nil, nil, &message)
        if rc != SQLITE_OK {
            let text = message.map { String(cString: $0) } ?? "error"
            sqlite3_free(message)
            throw Failure(code: rc, message: text)
        }
    }

    /// Runs one statement with parameters; returns the rows (empty for statements that give none).
    @discardableResult
    func query(_ sql: String, _ parameters: [Value] = []) throws -> [[Value]] {
        HTTPEngine.assertNotOnAnEngineThread()
        var statement: OpaquePointer?
        var rc = sqlite3_prepare_v2(handle, sql, -1, &statement, nil)
        guard rc == SQLITE_OK else { throw lastFailure(rc) }
        defer { sqlite3_finalize(statement) }
        for (index, value) in parameters.enumerated() {
            let position = Int32(index + 1)
            switch value {
            case .null: rc = sqlite3_bind_null(statement, position)
            case .integer(let v): rc = sqlite3_bind_int64(statement, position, v)
            case .real(let v): rc = sqlite3_bind_double(statement, position, v)
            case .text(let v): rc = sqlite3_bind_text(statement, position, v, -1, fetchd_sqlite_transient())
            case .blob(let v):
                rc = v.withUnsafeBytes { bytes in
                    sqlite3_bind_blob64(statement, position, bytes.baseAddress, sqlite3_uint64(bytes.count), fetchd_sqlite_transient())
                }
            }
            guard rc == SQLITE_OK else { throw lastFailure(rc) }
        }
        var rows: [[Value]] = []
        while true {
            rc = sqlite3_step(statement)
            if rc == SQLITE_DONE { break }
            guard rc == SQLITE_ROW else { throw lastFailure(rc) }
            let columns = sqlite3_column_count(statement)
            var row: [Value] = []
            row.reserveCapacity(Int(columns))
            for column in 0..<columns {
                switch sqlite3_column_type(statement, column) {
                case SQLITE_INTEGER: row.append(.integer(sqlite3_column_int64(statement, column)))
                case SQLITE_FLOAT: row.append(.real(sqlite3_column_double(statement, column)))
                case SQLITE_TEXT: row.append(.text(String(cString: sqlite3_column_text(statement, column))))
                case SQLITE_BLOB:
                    let count = Int(sqlite3_column_bytes(statement, column))
                    if count > 0, let base = sqlite3_column_blob(statement, column) {
                        row.append(.blob(Array(UnsafeRawBufferPointer(start: base, count: count))))
                    } else {
                        row.append(.blob([]))
                    }
                default: row.append(.null)
                }
            }
            rows.append(row)
        }
        return rows
    }

    /// Runs `body` in one transaction: committed when it returns, rolled back when it throws.
    @discardableResult
    func transaction<T>(_ body: () throws -> T) throws -> T {
        try execute("BEGIN IMMEDIATE")
        do {
            let result = try body()
            try execute("COMMIT")
            return result
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
    }

    /// Rows changed by the last INSERT, UPDATE or DELETE.
    var changes: Int { Int(sqlite3_changes(handle)) }

    private func lastFailure(_ rc: Int32) -> Failure {
        Failure(code: rc, message: String(cString: sqlite3_errmsg(handle)))
    }
}
