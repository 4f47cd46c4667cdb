import FetchEngine
import FoundationEssentials
import Glibc
import JSONRPC

/// Durable jobs on disk: one SQLite database, `<state-dir>/jobs.db` (WAL journal,
/// `synchronous=FULL`), one row per unfinished job holding the method and its params (no
/// credential), the restarts so far, a resumable upload's session URL and the retry state
/// (attempts made, failures the policy counted, time waited, jitter, the first start). A row
/// is committed (the WAL fsynced) before the job's first byte is sent, updated when the job
/// is resumed, when a resumable upload gets its session and after each failed attempt that
/// another follows, deleted when the job ends. What a download has received lives in its
/// part file and its validator in the part file's extended attribute (PartFileStage), so
/// nothing is written per block.
///
/// Every call may wait on the disk: the callers keep them off the engine thread (a job's
/// first save runs in the request's task, removals from the engine thread are handed to the
/// blocking threads, a session URL is saved while its attempt is prepared on them). One lock
/// serialises the connection (SQLiteDatabase is not thread-safe by itself).
///
/// The directory (0700, checked as the socket's is) and the database are made when the first
/// durable job comes, so a daemon that never gets one never touches the disk. A store that
/// SQLite cannot read (truncated, corrupt, not a database) is logged and moved aside, and a
/// new one is started.
final class DurableStore: Sendable {
    /// One job as written down.
    struct Record: Sendable {
        let jobID: String
        /// "download" or "upload".
        let method: String
        let params: JSONValue
        let restarts: Int
        /// A resumable upload's session, once the server gave one.
        var sessionURL: String? = nil
        /// Where its retries stood after its last failed attempt (none yet: zeros).
        var retry = Retry()
        /// When the job first started (wall clock, seconds since 1970): `retry.maxElapsed`
        /// counts from there across restarts.
        var started: Double = DurableStore.wallClock()
        /// How many daemons in a row died (kill -9, a crash, power lost: any end but a
        /// SIGTERM's shutdown) while the job was unfinished, the one just before included.
        var crashes = 0
    }

    /// A job the daemon died during this many times in a row is not resumed again: a job
    /// that crashes the daemon would otherwise crash every daemon after it.
    static let maxCrashes = 5

    /// A job's retry state as written down: a resumed job goes on from it.
    struct Retry: Sendable, Equatable {
        /// Attempts made (every request of a resumable upload's session counts), as results report.
        var attempts = 0
        /// `RetryState.failures`: what the policy's maxAttempts counts.
        var failures = 0
        /// Seconds waited between attempts.
        var waited = 0.0
        var jitter: Double?
    }

    /// Headers never written to the state directory (their auth rule applies again), with
    /// every header whose name says it carries a credential (`isCredentialHeader`).
    static let secretHeaders: Set<String> = ["authorization", "cookie", "proxy-authorization"]
    static let databaseName = "jobs.db"
    /// The schema this daemon writes (`PRAGMA user_version`). Schemas 1 (no retry state) and
    /// 2 (no crash count) are migrated in place at open (`migrations`).
    static let schemaVersion: Int64 = 3
    /// What turns a store of schema N into one of schema N + 1 (index 0: 1 -> 2), run in one
    /// transaction with the new user_version.
    static let migrations = [
        """
        ALTER TABLE jobs ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE jobs ADD COLUMN failures INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE jobs ADD COLUMN waited REAL NOT NULL DEFAULT 0;
        ALTER TABLE jobs ADD COLUMN jitter REAL;
        ALTER TABLE jobs ADD COLUMN started REAL;
        UPDATE jobs SET started = created;
        """,
        // `live`: 1 from the job's save until a daemon's clean stop (0), so the next daemon
        // can tell a death from a stop. Rows from before count as stopped cleanly.
        """
        ALTER TABLE jobs ADD COLUMN crashes INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE jobs ADD COLUMN live INTEGER NOT NULL DEFAULT 0;
        """,
    ]

    /// Seconds since 1970 on the wall clock.
    static func wallClock() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }

    let directory: String
    private let log: Logger
    /// The open store, once a durable job or the start needed it.
    private let database = Locked<SQLiteDatabase?>(nil)
    /// True on the thread no store call may wait on (the engine's, which also serves the socket).
    private let onForbiddenThread: @Sendable () -> Bool

    init(directory: String, log: Logger, onForbiddenThread: @escaping @Sendable () -> Bool = { false }) {
        self.directory = directory
        self.log = log
        self.onForbiddenThread = onForbiddenThread
    }

    var databasePath: String { directory + "/" + Self.databaseName }

    /// Whether a header of this name carries a credential: the three above, and names such
    /// as `X-Auth-Token`, `X-Api-Key`, `X-Amz-Security-Token`, `Client-Secret`.
    static func isCredentialHeader(_ name: String) -> Bool {
        let lower = name.lowercased()
        return secretHeaders.contains(lower) || lower.contains("auth") || lower.contains("api-key")
            || URLRedaction.isSecretName(lower)
    }

    /// The params as stored: the client's, its credential headers removed. A password in the
    /// URL's userinfo or in the proxy URL cannot be left out without changing the request
    /// (and is not added again after a restart): such a durable request is refused.
    static func storable(_ params: JSONValue?, jobID: String) throws -> JSONValue {
        var object = params?.objectValue ?? JSONObject()
        for field in ["url", "proxy"] {
            if let url = object[field]?.stringValue, URLRedaction.hasPassword(url) {
                throw RPCError.invalidParams(
                    field: field,
                    "a durable job is written to the state directory, and a password in the URL would be too: use an auth rule (setAuth) or the daemon's proxy environment instead")
            }
        }
        object["jobId"] = .string(jobID)
        if case .object(var headers)? = object["headers"] {
            for (name, _) in headers.members where isCredentialHeader(name) { headers[name] = nil }
            object["headers"] = .object(headers)
        }
        return .object(object)
    }

    /// Writes the job down, durably (the commit fsyncs the WAL), before it starts; again
    /// when it is resumed (with the retry state it was resumed with).
    func save(_ record: Record) throws {
        let now = Int64(time(nil))
        let retry = record.retry
        try saving {
            try $0.query("""
                INSERT INTO jobs (job_id, method, params, restarts, session_url, created, updated,
                                  attempts, failures, waited, jitter, started, crashes, live)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1)
                ON CONFLICT (job_id) DO UPDATE SET method = excluded.method, params = excluded.params,
                    restarts = excluded.restarts, session_url = excluded.session_url, updated = excluded.updated,
                    attempts = excluded.attempts, failures = excluded.failures, waited = excluded.waited,
                    jitter = excluded.jitter, started = excluded.started, crashes = excluded.crashes, live = 1
                """, [.text(record.jobID), .text(record.method), .text(String(decoding: JSONCodec.encode(record.params), as: UTF8.self)),
                      .integer(Int64(record.restarts)), record.sessionURL.map { .text($0) } ?? .null, .integer(now), .integer(now),
                      .integer(Int64(retry.attempts)), .integer(Int64(retry.failures)), .real(retry.waited),
                      retry.jitter.map { .real($0) } ?? .null, .real(record.started), .integer(Int64(record.crashes))])
        }
    }

    /// A resumable upload's session URL, once the server gave it (before the first chunk).
    func saveSession(jobID: String, url: String) throws {
        try saving {
            try $0.query("UPDATE jobs SET session_url = ?, updated = ? WHERE job_id = ?",
                         [.text(url), .integer(Int64(time(nil))), .text(jobID)])
        }
    }

    /// The retry state after a failed attempt that another follows. Never makes a row (a job
    /// that has ended meanwhile stays gone) and never goes back (an older write that comes
    /// late changes nothing). A failure is logged: the job goes on.
    func saveRetry(jobID: String, _ retry: Retry) {
        do {
            try saving {
                try $0.query("""
                    UPDATE jobs SET attempts = ?, failures = ?, waited = ?, jitter = ?, updated = ?
                    WHERE job_id = ? AND failures < ?
                    """, [.integer(Int64(retry.attempts)), .integer(Int64(retry.failures)), .real(retry.waited),
                          retry.jitter.map { .real($0) } ?? .null, .integer(Int64(time(nil))), .text(jobID),
                          .integer(Int64(retry.failures))])
            }
        } catch {
            log.warning("durable job \(jobID): cannot write its retry state to \(databasePath): \(error)")
        }
    }

    /// A write; its failure is a request's file error (-32003).
    private func saving(_ body: (SQLiteDatabase) throws -> Void) throws {
        do {
            try withDatabase(body)
        } catch let error as StartupError {
            throw TransferFileError(path: directory, detail: error.description)
        } catch {
            throw TransferFileError(path: databasePath, detail: "\(error)")
        }
    }

    /// The daemon stops cleanly (SIGTERM, after its jobs were cancelled): the jobs left are
    /// marked so, and the next daemon does not count this stop as a death (`Record.crashes`).
    /// No store yet: nothing is made.
    func stoppedCleanly() {
        var info = stat()
        guard lstat(databasePath, &info) == 0 else { return }
        do {
            try withDatabase { db in try db.execute("UPDATE jobs SET live = 0") }
        } catch {
            log.warning("durable jobs: cannot mark the clean stop in \(databasePath): \(error)")
        }
    }

    /// The job has ended: nothing is left to resume.
    func remove(jobID: String) {
        do {
            try withDatabase { db in try db.query("DELETE FROM jobs WHERE job_id = ?", [.text(jobID)]) }
        } catch {
            log.warning("durable job \(jobID): cannot remove it from \(databasePath): \(error)")
        }
    }

    /// Every job left by the daemon before, oldest first. A store SQLite cannot read is
    /// logged and moved aside (`jobs.db.corrupt-<UTC time>`), never fatal: the daemon starts
    /// with a new one. No store yet: nothing is made.
    func unfinished() -> [Record] {
        reportLegacyFiles()
        var info = stat()
        guard lstat(databasePath, &info) == 0 else { return [] }
        do {
            return try withDatabase { db in
                var records: [Record] = []
                for row in try db.query("""
                    SELECT job_id, method, params, restarts, session_url, attempts, failures, waited, jitter, started, created,
                           crashes, live
                    FROM jobs ORDER BY rowid
                    """) {
                    if let record = Self.record(row) {
                        records.append(record)
                    } else {
                        let id = row.first?.text ?? "?"
                        log.error("durable job \(id) in \(databasePath) cannot be read: removed, not resumed")
                        try db.query("DELETE FROM jobs WHERE job_id = ?", [row.first ?? .null])
                    }
                }
                return records
            }
        } catch let failure as SQLiteDatabase.Failure where Unreadable(failure) != nil {
            // Passed quick_check at open but cannot be read in full: set aside too.
            database.withLock { $0 = nil }
            moveAside(because: failure.description)
            return []
        } catch {
            log.error("durable jobs not resumed: \(error)")
            return []
        }
    }

    private static func record(_ row: [SQLiteDatabase.Value]) -> Record? {
        guard row.count == 13, let jobID = row[0].text, let method = row[1].text,
              method == "download" || method == "upload",
              let text = row[2].text, let params = try? JSONCodec.decode(Array(text.utf8)),
              case .object(let object) = params, object["jobId"]?.stringValue == jobID,
              let restarts = row[3].integer, restarts >= 0,
              let attempts = row[5].integer, let failures = row[6].integer, attempts >= 0, failures >= 0,
              let waited = row[7].real, waited >= 0,
              let started = row[9].real ?? row[10].real,
              let crashes = row[11].integer, crashes >= 0, let live = row[12].integer
        else { return nil }
        let retry = Retry(attempts: Int(attempts), failures: Int(failures), waited: waited, jitter: row[8].real)
        // Still live: the daemon before died during it. Else it stopped cleanly: a new count.
        return Record(jobID: jobID, method: method, params: params, restarts: Int(restarts), sessionURL: row[4].text,
                      retry: retry, started: started, crashes: live != 0 ? Int(crashes) + 1 : 0)
    }

    /// Runs `body` with the store, opened (made) on first use.
    @discardableResult
    private func withDatabase<T>(_ body: (SQLiteDatabase) throws -> T) throws -> T {
        assert(!onForbiddenThread(), "a durable store call on the engine thread")
        return try database.withLock { (db: inout SQLiteDatabase?) throws -> T in
            if db == nil { db = try open() }
            return try body(db!)
        }
    }

    /// The directory checked, then the store: the one there when SQLite can read it and it
    /// holds fetchd's jobs table, else a new one (the old moved aside).
    private func open() throws -> SQLiteDatabase {
        Self.makeParents(of: directory)
        let fix = "remove it, or choose another directory with --state-dir"
        try SocketPath.preparePrivateDirectory(directory, uid: getuid(), what: "state directory", fix: fix)
        let path = databasePath
        if access(path, F_OK) == 0 {
            do {
                return try openExisting(path)
            } catch let unreadable as Unreadable {
                moveAside(because: unreadable.reason)
            }
        }
        // Files of a store removed without them: never part of the new one (SQLite also
        // drops a WAL beside an empty database), and said, as their jobs are lost.
        for suffix in ["-wal", "-journal", "-shm"] where access(path + suffix, F_OK) == 0 {
            log.warning("durable job store: \(path + suffix) without \(path) removed")
            unlink(path + suffix)
        }
        // A new store: made 0600 here (SQLite would use 0644 & ~umask, and its -wal and -shm
        // files take the main file's mode), its name made durable, then its table.
        let fd = Glibc.open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw StartupError("cannot create \(path): \(String(cString: strerror(errno)))") }
        close(fd)
        LocalFile.syncDirectory(directory)
        let db = try SQLiteDatabase(path: path)
        try db.transaction {
            try db.execute("""
                CREATE TABLE jobs (
                    job_id TEXT PRIMARY KEY NOT NULL,
                    method TEXT NOT NULL,
                    params TEXT NOT NULL,
                    restarts INTEGER NOT NULL,
                    session_url TEXT,
                    created INTEGER NOT NULL,
                    updated INTEGER NOT NULL,
                    attempts INTEGER NOT NULL DEFAULT 0,
                    failures INTEGER NOT NULL DEFAULT 0,
                    waited REAL NOT NULL DEFAULT 0,
                    jitter REAL,
                    started REAL,
                    crashes INTEGER NOT NULL DEFAULT 0,
                    live INTEGER NOT NULL DEFAULT 0
                );
                PRAGMA user_version = \(Self.schemaVersion);
                """)
        }
        log.info("durable job store \(path) created")
        return db
    }

    /// A store that is not one: truncated, corrupt, not a database, not fetchd's.
    struct Unreadable: Error {
        let reason: String

        /// SQLite's failures that say the file is damaged (not busy, not a permission).
        init?(_ failure: SQLiteDatabase.Failure) {
            guard failure.isDamage else { return nil }
            reason = failure.description
        }

        init(reason: String) { self.reason = reason }
    }

    /// The store at `path` when SQLite reads it (quick_check) and it is fetchd's, of this
    /// schema or an earlier one (migrated in place, its jobs kept); `Unreadable` when it is
    /// damaged, not a job store, or of a schema this fetchd does not know.
    private func openExisting(_ path: String) throws -> SQLiteDatabase {
        var info = stat()
        guard lstat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
            throw StartupError("\(path) is not a regular file; remove it, or choose another directory with --state-dir")
        }
        do {
            let db = try SQLiteDatabase(path: path)
            let version = try db.query("PRAGMA user_version").first?.first?.integer ?? 0
            let tables = try db.query("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'jobs'")
            guard tables.first?.first?.integer == 1 else {
                throw Unreadable(reason: info.st_size == 0 ? "an empty file: truncated" : "no jobs table: not a fetchd job store")
            }
            guard version >= 1, version <= Self.schemaVersion else {
                throw Unreadable(reason: "schema \(version), this fetchd reads schemas 1 to \(Self.schemaVersion)")
            }
            if version < Self.schemaVersion {
                try db.transaction {
                    for step in Self.migrations[Int(version - 1)...] { try db.execute(step) }
                    try db.execute("PRAGMA user_version = \(Self.schemaVersion)")
                }
                log.notice("durable job store \(path): schema \(version) migrated to schema \(Self.schemaVersion)")
            }
            return db
        } catch let failure as SQLiteDatabase.Failure {
            throw Unreadable(failure) ?? failure
        }
    }

    /// Renames the store (and its WAL) to `jobs.db.corrupt-<UTC time>`, so nothing is lost
    /// and the next open starts a new one; its shared-memory index is removed.
    private func moveAside(because reason: String) {
        var now = time(nil)
        var parts = tm()
        gmtime_r(&now, &parts)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let stamp = "\(parts.tm_year + 1900)\(two(parts.tm_mon + 1))\(two(parts.tm_mday))T"
            + "\(two(parts.tm_hour))\(two(parts.tm_min))\(two(parts.tm_sec))Z"
        let aside = databasePath + ".corrupt-" + stamp
        let moved = rename(databasePath, aside) == 0
        let problem = moved ? "" : " (cannot rename it: \(String(cString: strerror(errno))); removed)"
        if !moved { unlink(databasePath) }
        for suffix in ["-wal", "-journal"] where access(databasePath + suffix, F_OK) == 0 {
            if !moved || rename(databasePath + suffix, aside + suffix) != 0 { unlink(databasePath + suffix) }
        }
        unlink(databasePath + "-shm")
        LocalFile.syncDirectory(directory)
        log.error("durable job store \(databasePath) cannot be read (\(reason)): moved to \(aside)\(problem); its jobs are not resumed, a new store is started")
    }

    /// The one-file-per-job directory of an earlier fetchd (`<state-dir>/jobs/*.json`) is
    /// not read: said once at start, so its owner can remove it.
    private func reportLegacyFiles() {
        guard let dir = opendir(directory + "/jobs") else { return }
        defer { closedir(dir) }
        var count = 0
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
            if name.hasSuffix(".json") { count += 1 }
        }
        if count > 0 {
            log.warning("\(directory)/jobs holds \(count) job file(s) of an earlier fetchd: they are ignored (durable jobs are now kept in \(databasePath)); remove that directory")
        }
    }

    /// mkdir -p of the directories above `path` (0700: ~/.local/state as XDG asks).
    private static func makeParents(of path: String) {
        var prefix = ""
        for part in PathText.directory(of: path).split(separator: "/") {
            prefix += "/" + part
            mkdir(prefix, 0o700)
        }
    }
}
