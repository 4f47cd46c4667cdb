internal import CLinux
import Dispatch
import FoundationEssentials
import Glibc

/// Where a download's body goes: a `.part` file the caller names, appended to when the
/// server honours a range, restarted from zero when it does not. The body of an answer
/// outside 200-299 never touches the file; up to `errorBodyLimit` of it is kept instead.
public struct DownloadTarget: Sendable {
    public var partPath: String
    /// Bytes already in the part file that this attempt asks to continue after.
    public var resumeOffset: Int64
    /// The digest of those bytes, so the final sha256 covers the whole file.
    public var hashOfExistingBytes: SHA256
    public var errorBodyLimit: Int
    /// Hands written pages to the disk as the download goes, for a file that will be
    /// fsynced at the end (the fsync then has little left to do). Without an fsync it
    /// would only slow the download down to the disk's speed.
    public var writesBackEarly: Bool

    public init(partPath: String, resumeOffset: Int64, hashOfExistingBytes: SHA256, errorBodyLimit: Int = 64 << 10,
                writesBackEarly: Bool = true) {
        self.writesBackEarly = writesBackEarly
        self.partPath = partPath
        self.resumeOffset = resumeOffset
        self.hashOfExistingBytes = hashOfExistingBytes
        self.errorBodyLimit = errorBodyLimit
    }

    /// The extended attribute that keeps the validator (ETag or Last-Modified) of the
    /// answer a part file holds, for If-Range when it is resumed.
    public static let validatorAttribute = "user.fetchd.validator"
}

/// What a finished download wrote.
public struct DownloadOutcome: Sendable {
    /// Size of the part file now.
    public var fileBytes: Int64
    /// The digest of the whole file (lowercase hex). Reading it waits for the download's
    /// hashing queue to finish its last blocks, so it is never read on the engine thread:
    /// the transfer ends without waiting for the hash.
    public var sha256: String {
        HTTPEngine.assertNotOnAnEngineThread()
        return digest.hex
    }
    let digest: PendingDigest
    /// True when this attempt continued existing bytes.
    public var resumed: Bool
    /// False when the answer was not 2xx and the file was left alone.
    public var wroteFile: Bool
}

/// The engine thread's writer for one attempt.
///
/// libcurl hands the body over in pieces of at most 16 KiB (CURL_MAX_WRITE_SIZE), however
/// much one read from the socket brought. The pieces of one read are gathered into a block
/// (up to `blockBytes`), which the download's queue writes with one `pwrite` and then hashes:
/// a system call and a hand-over per 16 KiB cost more than the copy. A piece shorter than
/// 16 KiB ends a read, so the block goes to the queue then: what has arrived reaches the file
/// even when the server stalls, and the end of every attempt hands over whatever is left.
///
/// The write is on the queue, not on the engine thread: with four 1 GiB downloads running,
/// `pwrite` on the engine thread takes 46% of its time (perf), and every small request
/// would wait behind it. A write that fails is seen by the engine thread at the next block (the transfer stops)
/// or, for the last blocks, when the engine ends the transfer after its writes (`whenWritten`).
final class DownloadSink: @unchecked Sendable {
    let target: DownloadTarget
    private let fd: Int32
    /// Hashes on its own thread, in order, so the digest costs the transfer no time.
    private let hasher: BackgroundHasher
    /// Where the next block goes in the file; the bytes in `block` come after it.
    private var offset: Int64
    private var block: BodyBlock?
    static let blockBytes = 512 << 10
    /// libcurl's CURL_MAX_WRITE_SIZE: the largest piece it passes at once.
    static let largestPiece = 16 << 10
    /// Dirty pages are handed to the kernel's writeback every `writebackBytes`, so the
    /// fsync before landing finds little left to write. That call can wait for the disk's
    /// queue, so it runs on the hashing queue, after the block's hash, never on the engine
    /// thread: a slow disk then slows the hash, and the hash pauses the transfer.
    private var writebackFrom: Int64
    static let writebackBytes: Int64 = 8 << 20
    private var decided = false
    private var toFile = false
    private(set) var resumed = false
    private(set) var failure: Failure?

    /// Why the download stopped: the local file could not be written (a file error for the
    /// client, naming the part file), or the server's answer cannot be continued.
    enum Failure: Equatable {
        case writing(String)
        case answer(String)

        var detail: String {
            switch self {
            case .writing(let detail), .answer(let detail): detail
            }
        }
    }

    /// `hashQueue`: the download's own serial queue for its hash (the engine's targets one
    /// queue shared by every download; tests hold one to make the hash fall behind). So is
    /// `descriptor` for tests (a device that refuses writes, which the part file's open refuses).
    init(target: DownloadTarget, hashQueue: DispatchQueue? = nil, descriptor: Int32? = nil) throws(TransferFileError) {
        self.target = target
        if let descriptor { fd = descriptor } else { fd = try LocalFile.openForWriting(target.partPath) }
        hasher = hashQueue.map { BackgroundHasher(target.hashOfExistingBytes, queue: $0) }
            ?? BackgroundHasher(target.hashOfExistingBytes)
        offset = target.resumeOffset
        writebackFrom = offset
    }

    deinit {
        // Closed on the hashing queue, after its last block: after a truncate to zero (a
        // restart) ext4 flushes the file's dirty pages in close(), which stalled the engine
        // thread for half a second at the end of a restarted 1 GiB download.
        let fd = self.fd
        hasher.queue.async { close(fd) }
    }

    /// What `write` did with a piece.
    enum Taken {
        /// Written or gathered: the transfer goes on.
        case all
        /// The transfer must stop (`failure` says why).
        case stop
        /// Nothing taken: the hashing thread is behind. libcurl holds the piece and the
        /// transfer until `resume` (called from the hashing thread once it has caught up)
        /// unpauses it. The engine thread never waits for the hash.
        case pause
    }

    /// Called with each piece of the body.
    func write(_ bytes: UnsafeRawBufferPointer, status: Int, headers: ResponseHeaders, errorBody: inout [UInt8],
               resume: @escaping @Sendable () -> Void) -> Taken {
        if !decided { decide(status: status, headers: headers) }
        if failure != nil { return .stop }
        guard toFile else {
            let room = max(0, target.errorBodyLimit - errorBody.count)
            errorBody.append(contentsOf: bytes.prefix(room))
            return .all
        }
        if block == nil {
            // A write on the queue failed: nothing more is taken.
            if let detail = hasher.writeFailure {
                failure = .writing(detail)
                return .stop
            }
            // The backlog only grows when a block is handed over: asked once per block, not per piece.
            if hasher.pauseIfBehind(resume: resume) { return .pause }
        }
        var rest = bytes
        while !rest.isEmpty {
            let block = self.block ?? hasher.spareBlock() ?? BodyBlock(capacity: Self.blockBytes)
            self.block = block
            let take = min(rest.count, block.room)
            block.append(UnsafeRawBufferPointer(rebasing: rest.prefix(take)))
            rest = UnsafeRawBufferPointer(rebasing: rest.dropFirst(take))
            if block.room == 0 && !writeBlock(block) { return .stop }
        }
        if bytes.count < Self.largestPiece, let block, !writeBlock(block) { return .stop }
        return .all
    }

    /// Hands the gathered bytes to the queue to be written and hashed; false when a write
    /// has failed already (`failure` says why). Called at the end of an attempt, whatever its
    /// outcome: what arrived is kept in the part file for a resume.
    @discardableResult
    func flush() -> Bool {
        guard failure == nil else { return false }
        guard let block, block.count > 0 else { return true }
        return writeBlock(block)
    }

    /// Calls `done` on the download's queue once every block handed over is written (and
    /// hashed), with why a write failed, if one did.
    func whenWritten(_ done: @escaping @Sendable (_ writeFailure: String?) -> Void) {
        hasher.queue.async { [hasher] in done(hasher.writeFailure) }
    }

    private func writeBlock(_ block: BodyBlock) -> Bool {
        if let detail = hasher.writeFailure {
            failure = .writing(detail)
            return false
        }
        let at = offset
        offset += Int64(block.count)
        self.block = nil
        let write = FileWrite(fd: fd, offset: at, path: target.partPath)
        if target.writesBackEarly && offset - writebackFrom >= Self.writebackBytes {
            let (from, length) = (writebackFrom, offset - writebackFrom)
            writebackFrom = offset
            // Holds the sink (so its descriptor stays open) until the call is made.
            hasher.update(taking: block, writing: write) { [self] in _ = fetchd_start_writeback(fd, from, length) }
        } else {
            hasher.update(taking: block, writing: write)  // the block itself: no copy
        }
        return true
    }

    private func decide(status: Int, headers: ResponseHeaders) {
        decided = true
        guard (200...299).contains(status) else { return }
        toFile = true
        if status == 206 && target.resumeOffset > 0 {
            let range = headers.last(named: "content-range") ?? ""
            guard Self.rangeStart(range) == target.resumeOffset else {
                failure = .answer("the server resumed at the wrong place (Content-Range: \(range))")
                return
            }
            resumed = true
            // On the queue, after the blocks an earlier attempt handed over: they must not
            // land past the cut.
            let (fd, offset) = (fd, offset)
            hasher.queue.async { _ = ftruncate(fd, off_t(offset)) }
        } else {
            // A full answer: the file starts again from zero.
            restartFromZero()
        }
        let validator = headers.last(named: "etag")
            ?? headers.last(named: "last-modified")
        if let validator {
            _ = fetchd_fsetxattr(fd, DownloadTarget.validatorAttribute, validator, UInt(validator.utf8.count))
        } else {
            _ = fetchd_fremovexattr(fd, DownloadTarget.validatorAttribute)
        }
    }

    private func restartFromZero() {
        // Only a file with bytes in it is cut: on ext4, truncating a file to zero marks it to
        // have all its dirty pages flushed when it is closed (auto_da_alloc), and that close
        // takes 0.8 s after a 1 GiB download, on whichever thread closes the file.
        // On the queue, after any blocks an earlier attempt handed over.
        let fd = fd
        hasher.queue.async {
            var info = stat()
            if fstat(fd, &info) != 0 || info.st_size > 0 { ftruncate(fd, 0) }
        }
        offset = 0
        block?.count = 0
        writebackFrom = 0
        hasher.reset(to: SHA256())
        resumed = false
    }

    /// At the end of a successful transfer: writes the last block. A write that fails here
    /// leaves `failure` set, and the transfer fails with it.
    func finish(status: Int, headers: ResponseHeaders) -> DownloadOutcome {
        if !decided { decide(status: status, headers: headers) }  // an empty body
        flush()
        return DownloadOutcome(fileBytes: offset, digest: PendingDigest(hasher), resumed: resumed, wroteFile: toFile)
    }

    /// "bytes 100-199/1000" -> 100
    static func rangeStart(_ value: String) -> Int64? {
        let parts = value.trimmingBlanks().split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bytes", let dash = parts[1].firstIndex(of: "-") else { return nil }
        return Int64(parts[1][..<dash])
    }
}

/// A buffer the writer fills and the hasher hashes, then handed back to be filled again.
/// One owner at a time: the writer until `update(taking:)`, then the hasher's queue, then
/// (through the lock of the spares) the writer again.
final class BodyBlock: @unchecked Sendable {
    let capacity: Int
    private let start: UnsafeMutableRawPointer
    var count = 0

    init(capacity: Int) {
        self.capacity = capacity
        start = .allocate(byteCount: capacity, alignment: 64)
    }

    deinit { start.deallocate() }

    var room: Int { capacity - count }
    var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: start, count: count) }

    func append(_ piece: UnsafeRawBufferPointer) {
        precondition(piece.count <= room)
        if let base = piece.baseAddress { (start + count).copyMemory(from: base, byteCount: piece.count) }
        count += piece.count
    }
}

/// Where a block goes in a part file; written on the download's queue.
struct FileWrite: Sendable {
    let fd: Int32
    let offset: Int64
    let path: String

    /// Writes all of `bytes` at `offset`; why not, if it failed.
    func write(_ bytes: UnsafeRawBufferPointer) -> String? {
        var written = 0
        while written < bytes.count {
            let n = pwrite(fd, bytes.baseAddress! + written, bytes.count - written, off_t(offset) + off_t(written))
            if n < 0 {
                if errno == EINTR { continue }
                return "writing \(path): \(String(cString: strerror(errno)))"
            }
            written += n
        }
        return nil
    }
}
