import CLinux
import CSQLite
import FetchEngine
import Glibc

/// The HTTP cache on disk (docs/cache.md): `<dir>/index.sqlite` (SQLite, WAL) holds one row
/// per stored response (its URL, credential partition, Vary key, status, headers, times, LRU
/// stamp); each body is a file `<dir>/bodies/<name>`. A body is written to `<dir>/tmp/` and
/// renamed into `bodies/` only once complete, and its row is inserted after the rename, so an
/// interrupted write (a crash, kill -9) leaves at most a temporary file or an unreferenced
/// body, both removed at the next open, never a row that serves a truncated body; a body
/// whose size is not its row's is dropped when read. Bounded by `maxBytes` (bodies and
/// headers), least recently used first out.
///
/// Thread-safe: one SQLite connection behind a lock; file reads and writes happen outside
/// it. Never called on the engine thread (`HTTPCache` runs it on the blocking threads).
final class CacheStore: Sendable {
    struct Entry: Sendable, Equatable {
        let id: Int64
        let url: String
        let partition: String
        let varyKey: String
        var stored: StoredResponse
        let bodyFile: String
        let bodyBytes: Int64
    }

    struct Failure: Error, CustomStringConvertible {
        let path: String
        let detail: String
        var description: String { "\(path): \(detail)" }
    }

    let directory: String
    let maxBytes: Int64
    private let state: Locked<State>
    /// The counts, apart from the index's lock: getCacheStats reads them on the thread that
    /// reads requests, which must never wait for a long transaction (a purge, an eviction).
    private let published = Locked<(entries: Int, bytes: Int64)>((0, 0))

    private struct State: @unchecked Sendable {
        let db: SQLiteDatabase
        var totalBytes: Int64
        var entries: Int
        /// Uses not yet written (id -> stamp).
        var touched: [Int64: Int64] = [:]
    }

    var bodiesDirectory: String { directory + "/bodies" }
    var temporaryDirectory: String { directory + "/tmp" }

    init(directory: String, maxBytes: Int64) throws {
        self.directory = directory
        self.maxBytes = maxBytes
        for dir in [directory, directory + "/bodies", directory + "/tmp"] {
            if mkdir(dir, 0o700) != 0 && errno != EEXIST {
                throw Failure(path: dir, detail: "cannot create: \(String(cString: strerror(errno)))")
            }
        }
        let path = directory + "/index.sqlite"
        let db: SQLiteDatabase
        do {
            db = try SQLiteDatabase(path: path, synchronousFull: false)
        } catch {
            // A damaged index is moved aside: the cache starts empty, the bodies are orphans.
            rename(path, path + ".corrupt")
            unlink(path + "-wal")
            unlink(path + "-shm")
            db = try SQLiteDatabase(path: path, synchronousFull: false)
        }
        try db.execute("""
            CREATE TABLE IF NOT EXISTS entries (
                id INTEGER PRIMARY KEY,
                url TEXT NOT NULL,
                partition TEXT NOT NULL,
                vary_key TEXT NOT NULL,
                status INTEGER NOT NULL,
                headers TEXT NOT NULL,
                request_time REAL NOT NULL,
                response_time REAL NOT NULL,
                body_file TEXT NOT NULL,
                body_bytes INTEGER NOT NULL,
                bytes INTEGER NOT NULL,
                last_used INTEGER NOT NULL
            );
            CREATE INDEX IF NOT EXISTS entries_url ON entries(url, partition);
            CREATE INDEX IF NOT EXISTS entries_lru ON entries(last_used);
            """)
        let counts = try db.query("SELECT COUNT(*), COALESCE(SUM(bytes), 0) FROM entries")
        state = Locked(State(db: db, totalBytes: counts.first?[1].integer ?? 0, entries: Int(counts.first?[0].integer ?? 0)))
        try cleanUp()
        state.withLock { publish($0) }
    }

    /// After a crash: temporary files go, bodies no row names go, rows without their body go.
    private func cleanUp() throws {
        for name in Self.names(in: temporaryDirectory) { unlink(temporaryDirectory + "/" + name) }
        let referenced = try state.withLock { s in
            Set(try s.db.query("SELECT body_file FROM entries").compactMap { $0.first?.text })
        }
        let present = Set(Self.names(in: bodiesDirectory))
        for name in present.subtracting(referenced) { unlink(bodiesDirectory + "/" + name) }
        let missing = referenced.subtracting(present)
        if !missing.isEmpty {
            try state.withLock { s in
                for name in missing { try s.db.query("DELETE FROM entries WHERE body_file = ?", [.text(name)]) }
                try recount(&s)
            }
        }
    }

    private func recount(_ s: inout State) throws {
        let counts = try s.db.query("SELECT COUNT(*), COALESCE(SUM(bytes), 0) FROM entries")
        s.entries = Int(counts.first?[0].integer ?? 0)
        s.totalBytes = counts.first?[1].integer ?? 0
        publish(s)
    }

    private func publish(_ s: State) {
        published.withLock { $0 = (s.entries, s.totalBytes) }
    }

    static func names(in directory: String) -> [String] {
        guard let dir = opendir(directory) else { return [] }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafePointer(to: entry.pointee.d_name) {
                $0.withMemoryRebound(to: CChar.self, capacity: 256) { String(cString: $0) }
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    // MARK: reading

    /// Every stored variant of a URL for one credential partition, newest first.
    func variants(url: String, partition: String) -> [Entry] {
        (try? state.withLock { s in
            try s.db.query("""
                SELECT id, url, partition, vary_key, status, headers, request_time, response_time, body_file, body_bytes
                FROM entries WHERE url = ? AND partition = ? ORDER BY response_time DESC
                """, [.text(url), .text(partition)]).compactMap(Self.entry)
        }) ?? []
    }

    /// The stored variant whose Vary-selected request fields match (RFC 9111 4.1).
    func select(url: String, partition: String, requestHeaders: [HTTPHeader]) -> Entry? {
        variants(url: url, partition: partition).first { entry in
            guard let names = CacheRules.varyNames(entry.stored.headers) else { return false }
            return CacheRules.varyKey(names: names, requestHeaders: requestHeaders) == entry.varyKey
        }
    }

    private static func entry(_ row: [SQLiteDatabase.Value]) -> Entry? {
        guard row.count == 10, let id = row[0].integer, let url = row[1].text, let partition = row[2].text,
              let vary = row[3].text, let status = row[4].integer, let headers = row[5].text,
              let requestTime = row[6].real, let responseTime = row[7].real, let file = row[8].text,
              let bytes = row[9].integer else { return nil }
        return Entry(id: id, url: url, partition: partition, varyKey: vary,
                     stored: StoredResponse(status: Int(status), headers: decodeHeaders(headers),
                                            requestTime: requestTime, responseTime: responseTime),
                     bodyFile: file, bodyBytes: bytes)
    }

    func bodyPath(_ entry: Entry) -> String { bodiesDirectory + "/" + entry.bodyFile }

    /// Opens a stored body for reading: nil when it is gone or not its row's size (the row is
    /// then dropped). The caller reads and closes the descriptor.
    func openBody(_ entry: Entry) -> Int32? {
        let fd = open(bodyPath(entry), O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else {
            remove(ids: [entry.id])
            return nil
        }
        var info = stat()
        guard fstat(fd, &info) == 0, Int64(info.st_size) == entry.bodyBytes else {
            close(fd)
            remove(ids: [entry.id])
            return nil
        }
        return fd
    }

    /// The whole stored body (a fetch's answer holds it in memory anyway).
    func readBody(_ entry: Entry) -> [UInt8]? {
        guard let fd = openBody(entry) else { return nil }
        defer { close(fd) }
        var body = [UInt8](repeating: 0, count: Int(entry.bodyBytes))
        var done = 0
        while done < body.count {
            let n = body[done...].withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, off_t(done)) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else {
                remove(ids: [entry.id])
                return nil
            }
            done += n
        }
        return body
    }

    /// Marks a use (LRU). Kept in memory and written in one transaction with the next store
    /// (before it evicts), purge, or every 64 uses: a hit costs no SQLite write of its own.
    func touch(_ entry: Entry) {
        state.withLock { s in
            s.touched[entry.id] = Self.stamp()
            if s.touched.count >= 64 { try? flushTouches(&s) }
        }
    }

    private func flushTouches(_ s: inout State) throws {
        guard !s.touched.isEmpty else { return }
        let touched = s.touched
        s.touched = [:]
        try s.db.transaction {
            for (id, stamp) in touched {
                try s.db.query("UPDATE entries SET last_used = ? WHERE id = ?", [.integer(stamp), .integer(id)])
            }
        }
    }

    /// A strictly growing use stamp: the clock in microseconds.
    private static func stamp() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Int64(now.tv_sec) * 1_000_000 + Int64(now.tv_nsec / 1000)
    }

    // MARK: writing

    /// A body being written: a temporary file, renamed into place by `insert`.
    final class BodyWriter: @unchecked Sendable {
        let fd: Int32
        let path: String
        private(set) var bytes: Int64 = 0
        private(set) var failure: String?

        init(fd: Int32, path: String) {
            self.fd = fd
            self.path = path
        }

        func write(_ buffer: UnsafeRawBufferPointer) {
            var done = 0
            while failure == nil && done < buffer.count {
                let n = Glibc.write(fd, buffer.baseAddress! + done, buffer.count - done)
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else {
                    failure = String(cString: strerror(errno))
                    break
                }
                done += n
            }
            bytes += Int64(done)
        }

        /// The whole of `source` (a downloaded file): reflinked where the filesystem allows,
        /// else copied in the kernel. Nothing passes through memory.
        func copy(from source: Int32) {
            var cloned: Int32 = 0
            let copied = fetchd_clone_or_copy(source, fd, &cloned)
            if copied < 0 {
                failure = String(cString: strerror(Int32(-copied)))
            } else {
                bytes += copied
            }
        }

        func write(_ bytes: [UInt8]) {
            bytes.withUnsafeBytes { write($0) }
        }

        func discard() {
            close(fd)
            unlink(path)
        }
    }

    func newBody() throws -> BodyWriter {
        let name = Self.randomName()
        let path = temporaryDirectory + "/" + name
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw Failure(path: path, detail: String(cString: strerror(errno))) }
        return BodyWriter(fd: fd, path: path)
    }

    private static func randomName() -> String {
        let value = UInt64.random(in: 0...UInt64.max)
        let hex = String(value, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }

    /// Stores a complete body with its response: the file is renamed into place, then its row
    /// replaces the variant with the same Vary key; then least recently used entries go until
    /// the cache fits. Nil when it does not fit at all or the write failed.
    @discardableResult
    func insert(url: String, partition: String, varyKey: String, stored: StoredResponse, body: BodyWriter) -> Entry? {
        let headerText = Self.encodeHeaders(stored.headers)
        let size = body.bytes + Int64(headerText.utf8.count)
        guard body.failure == nil, size <= maxBytes else {
            body.discard()
            return nil
        }
        close(body.fd)
        let name = Self.randomName()
        guard rename(body.path, bodiesDirectory + "/" + name) == 0 else {
            unlink(body.path)
            return nil
        }
        let entry: Entry? = try? state.withLock { s in
            try flushTouches(&s)
            return try s.db.transaction { () throws -> Entry in
                let old = try s.db.query("SELECT id, body_file, bytes FROM entries WHERE url = ? AND partition = ? AND vary_key = ?",
                                         [.text(url), .text(partition), .text(varyKey)])
                try deleteRows(old, &s)
                try s.db.query("""
                    INSERT INTO entries (url, partition, vary_key, status, headers, request_time, response_time,
                                         body_file, body_bytes, bytes, last_used) VALUES (?,?,?,?,?,?,?,?,?,?,?)
                    """, [.text(url), .text(partition), .text(varyKey), .integer(Int64(stored.status)), .text(headerText),
                          .real(stored.requestTime), .real(stored.responseTime), .text(name), .integer(body.bytes),
                          .integer(size), .integer(Self.stamp())])
                let id = try s.db.query("SELECT last_insert_rowid()").first?.first?.integer ?? 0
                s.totalBytes += size
                s.entries += 1
                publish(s)
                while s.totalBytes > maxBytes {
                    let oldest = try s.db.query("SELECT id, body_file, bytes FROM entries WHERE id != ? ORDER BY last_used LIMIT 1",
                                                [.integer(id)])
                    if oldest.isEmpty { break }
                    try deleteRows(oldest, &s)
                }
                return Entry(id: id, url: url, partition: partition, varyKey: varyKey, stored: stored, bodyFile: name,
                             bodyBytes: body.bytes)
            }
        }
        if entry == nil { unlink(bodiesDirectory + "/" + name) }
        return entry
    }

    /// Rows of (id, body_file, bytes): deleted, their bodies unlinked (a reader that opened
    /// one already keeps reading it).
    private func deleteRows(_ rows: [[SQLiteDatabase.Value]], _ s: inout State) throws {
        for row in rows {
            guard let id = row[0].integer else { continue }
            try s.db.query("DELETE FROM entries WHERE id = ?", [.integer(id)])
            if s.db.changes > 0 {
                s.entries -= 1
                s.totalBytes -= row[2].integer ?? 0
                if let file = row[1].text { unlink(bodiesDirectory + "/" + file) }
            }
        }
        publish(s)
    }

    /// A 304 freshened the stored response (its headers and times).
    func update(_ entry: Entry, to stored: StoredResponse) {
        let headerText = Self.encodeHeaders(stored.headers)
        _ = try? state.withLock { s in
            try s.db.query("""
                UPDATE entries SET status = ?, headers = ?, request_time = ?, response_time = ?, last_used = ?,
                bytes = body_bytes + ? WHERE id = ?
                """, [.integer(Int64(stored.status)), .text(headerText), .real(stored.requestTime), .real(stored.responseTime),
                      .integer(Self.stamp()), .integer(Int64(headerText.utf8.count)), .integer(entry.id)])
            try recount(&s)
        }
    }

    func remove(ids: [Int64]) {
        _ = try? state.withLock { s in
            for id in ids {
                let rows = try s.db.query("SELECT id, body_file, bytes FROM entries WHERE id = ?", [.integer(id)])
                try deleteRows(rows, &s)
            }
        }
    }

    /// Every stored response of these URLs, whatever its credential or variant.
    @discardableResult
    func remove(urls: [String]) -> Int {
        (try? state.withLock { s in
            var removed = 0
            for url in urls {
                let rows = try s.db.query("SELECT id, body_file, bytes FROM entries WHERE url = ?", [.text(url)])
                try deleteRows(rows, &s)
                removed += rows.count
            }
            return removed
        }) ?? 0
    }

    /// purgeCache: one URL, the URLs under a prefix, or everything.
    func purge(url: String?, prefix: String?) throws -> Int {
        try state.withLock { s in
            try flushTouches(&s)
            let rows: [[SQLiteDatabase.Value]]
            if let url {
                rows = try s.db.query("SELECT id, body_file, bytes FROM entries WHERE url = ?", [.text(url)])
            } else if let prefix {
                rows = try s.db.query("SELECT id, body_file, bytes FROM entries WHERE substr(url, 1, ?) = ?",
                                      [.integer(Int64(prefix.unicodeScalars.count)), .text(prefix)])
            } else {
                rows = try s.db.query("SELECT id, body_file, bytes FROM entries")
            }
            try s.db.transaction { try deleteRows(rows, &s) }
            return rows.count
        }
    }

    var counts: (entries: Int, bytes: Int64) {
        published.withLock { $0 }
    }

    // MARK: headers as text

    /// "Name: value" lines (a field value never holds CR or LF).
    static func encodeHeaders(_ headers: [HTTPHeader]) -> String {
        headers.map { "\($0.name): \($0.value)\n" }.joined()
    }

    static func decodeHeaders(_ text: String) -> [HTTPHeader] {
        text.split(separator: "\n").compactMap { line in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            let value = line[line.index(after: colon)...]
            return HTTPHeader(String(line[..<colon]), String(value.hasPrefix(" ") ? value.dropFirst() : value))
        }
    }
}
