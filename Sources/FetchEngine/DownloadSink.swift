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
public struct DownloadOutcome: Sendable, Equatable {
    /// Size of the part file now.
    public var fileBytes: Int64
    public var sha256: String
    /// True when this attempt continued existing bytes.
    public var resumed: Bool
    /// False when the answer was not 2xx and the file was left alone.
    public var wroteFile: Bool
}

/// The engine thread's writer for one attempt.
final class DownloadSink: @unchecked Sendable {
    let target: DownloadTarget
    private let fd: Int32
    /// Hashes on its own thread, in order, so the digest costs the transfer no time.
    private let hasher: BackgroundHasher
    private var offset: Int64
    /// Dirty pages are handed to the kernel's writeback every `writebackBytes`, so the
    /// fsync before landing finds little left to write.
    private var writebackFrom: Int64
    static let writebackBytes: Int64 = 8 << 20
    private var decided = false
    private var toFile = false
    private(set) var resumed = false
    private(set) var failure: String?

    init(target: DownloadTarget) throws(TransferFileError) {
        self.target = target
        fd = open(target.partPath, O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw TransferFileError(path: target.partPath, detail: String(cString: strerror(errno))) }
        hasher = BackgroundHasher(target.hashOfExistingBytes)
        offset = target.resumeOffset
        writebackFrom = offset
    }

    deinit { close(fd) }

    /// Called with each piece of the body. Returns false to stop the transfer.
    func write(_ bytes: UnsafeRawBufferPointer, status: Int, headers: [HTTPHeader], errorBody: inout [UInt8]) -> Bool {
        if !decided { decide(status: status, headers: headers) }
        if failure != nil { return false }
        guard toFile else {
            let room = max(0, target.errorBodyLimit - errorBody.count)
            errorBody.append(contentsOf: bytes.prefix(room))
            return true
        }
        var written = 0
        while written < bytes.count {
            let n = pwrite(fd, bytes.baseAddress! + written, bytes.count - written, off_t(offset))
            if n < 0 {
                if errno == EINTR { continue }
                failure = "writing \(target.partPath): \(String(cString: strerror(errno)))"
                return false
            }
            written += n
            offset += Int64(n)
        }
        hasher.update(bytes)
        if target.writesBackEarly && offset - writebackFrom >= Self.writebackBytes {
            _ = fetchd_start_writeback(fd, writebackFrom, offset - writebackFrom)
            writebackFrom = offset
        }
        return true
    }

    private func decide(status: Int, headers: [HTTPHeader]) {
        decided = true
        guard (200...299).contains(status) else { return }
        toFile = true
        if status == 206 && target.resumeOffset > 0 {
            let range = headers.last { $0.name.lowercased() == "content-range" }?.value ?? ""
            guard Self.rangeStart(range) == target.resumeOffset else {
                failure = "the server resumed at the wrong place (Content-Range: \(range))"
                return
            }
            resumed = true
            ftruncate(fd, off_t(offset))
        } else {
            // A full answer: the file starts again from zero.
            restartFromZero()
        }
        let validator = headers.last { $0.name.lowercased() == "etag" }?.value
            ?? headers.last { $0.name.lowercased() == "last-modified" }?.value
        if let validator {
            _ = fetchd_fsetxattr(fd, DownloadTarget.validatorAttribute, validator, UInt(validator.utf8.count))
        } else {
            _ = fetchd_fremovexattr(fd, DownloadTarget.validatorAttribute)
        }
    }

    private func restartFromZero() {
        ftruncate(fd, 0)
        offset = 0
        writebackFrom = 0
        hasher.reset(to: SHA256())
        resumed = false
    }

    /// At the end of a successful transfer.
    func finish(status: Int, headers: [HTTPHeader]) -> DownloadOutcome {
        if !decided { decide(status: status, headers: headers) }  // an empty body
        var digest = hasher.result()
        return DownloadOutcome(fileBytes: offset, sha256: digest.finishHex(), resumed: resumed, wroteFile: toFile)
    }

    /// "bytes 100-199/1000" -> 100
    static func rangeStart(_ value: String) -> Int64? {
        let parts = value.trimmingBlanks().split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bytes", let dash = parts[1].firstIndex(of: "-") else { return nil }
        return Int64(parts[1][..<dash])
    }
}

/// Runs SHA-256 updates on a serial queue of its own. Each piece is copied (a memcpy is far
/// cheaper than hashing it); when more than `maxPendingBytes` wait, the caller waits for the
/// queue, so memory stays bounded even if hashing falls behind.
final class BackgroundHasher: @unchecked Sendable {
    static let maxPendingBytes = 8 << 20
    private let queue = DispatchQueue(label: "fetchd.sha256")
    private var hasher: SHA256  // queue only
    private let pending = Locked(0)

    init(_ start: SHA256) {
        hasher = start
    }

    func update(_ bytes: UnsafeRawBufferPointer) {
        let copy = [UInt8](bytes)
        let waiting = pending.withLock { p -> Int in
            p += copy.count
            return p
        }
        let work: @Sendable () -> Void = { [self] in
            hasher.update(copy)
            pending.withLock { $0 -= copy.count }
        }
        if waiting > Self.maxPendingBytes { queue.sync(execute: work) } else { queue.async(execute: work) }
    }

    func reset(to start: SHA256) {
        queue.sync { hasher = start }
    }

    /// Waits for every queued piece, then returns the state.
    func result() -> SHA256 {
        queue.sync { hasher }
    }
}
