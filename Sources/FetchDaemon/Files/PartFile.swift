internal import CLinux
import FetchEngine
import FoundationEssentials
import Glibc

/// A download's `<path>.part`: what is in it, and landing it under its final name. File work:
/// never on an engine thread (asserted in debug builds).
struct PartFile: Sendable {
    let finalPath: String
    var path: String { finalPath + ".part" }

    /// Size in bytes, or nil when there is no part file.
    var size: Int64? {
        HTTPEngine.assertNotOnAnEngineThread()
        var info = stat()
        // lstat: a link planted under the name is not a part file.
        guard lstat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return nil }
        return Int64(info.st_size)
    }

    /// The ETag or Last-Modified of the answer the part holds (for If-Range).
    var validator: String? {
        HTTPEngine.assertNotOnAnEngineThread()
        var buffer = [CChar](repeating: 0, count: 1024)
        let n = fetchd_lgetxattr(path, DownloadTarget.validatorAttribute, &buffer, UInt(buffer.count - 1))
        guard n > 0 else { return nil }
        return String(decoding: buffer[0..<Int(n)].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The digest of the first `length` bytes.
    func hash(upTo length: Int64) throws -> SHA256 {
        let fd = try LocalFile.openForReading(path, followLinks: false)
        defer { close(fd) }
        var hasher = SHA256()
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var left = length
        while left > 0 {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, Int(min(Int64($0.count), left))) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw TransferFileError(path: path, detail: "the part file is shorter than it was") }
            buffer.withUnsafeBytes { hasher.update(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
            left -= Int64(n)
        }
        return hasher
    }

    /// fsync (when `durable`), then gives the final name to the very file that was written:
    /// linked through its descriptor (so a link or another file swapped in under the part's
    /// name is never what lands), replacing the final name only when `overwrite` allows it.
    func land(overwrite: Bool, durable: Bool = true) throws {
        let fd = try LocalFile.openForReading(path, followLinks: false)
        defer { close(fd) }
        if durable {
            guard fsync(fd) == 0 else { throw TransferFileError(path: path, detail: "fsync: \(String(cString: strerror(errno)))") }
        }
        _ = fetchd_fremovexattr(fd, DownloadTarget.validatorAttribute)
        let directory = PathText.directory(of: finalPath)
        if overwrite {
            // A fresh name nobody else can have, then a rename over the final name: a link
            // there is replaced, never followed.
            let (placeholder, temporary) = try LocalFile.createTemporary(in: directory, for: PathText.lastComponent(of: finalPath))
            close(placeholder)
            unlink(temporary)
            guard LocalFile.link(fd, to: temporary) == 0 else {
                throw TransferFileError(path: finalPath, detail: "link: \(String(cString: strerror(errno)))")
            }
            guard rename(temporary, finalPath) == 0 else {
                let detail = "rename: \(String(cString: strerror(errno)))"
                unlink(temporary)
                throw TransferFileError(path: finalPath, detail: detail)
            }
        } else {
            guard LocalFile.link(fd, to: finalPath) == 0 else {
                let detail = errno == EEXIST ? "already exists (set overwrite to replace it)" : "link: \(String(cString: strerror(errno)))"
                throw TransferFileError(path: finalPath, detail: detail)
            }
        }
        // The part's name goes only if it still names this file.
        if LocalFile.identity(ofPath: path) == LocalFile.identity(of: fd) { unlink(path) }
        // The directory entry itself is durable once the directory is synced.
        if durable { LocalFile.syncDirectory(directory) }
    }

    func remove() {
        HTTPEngine.assertNotOnAnEngineThread()
        unlink(path)
    }

    /// Removes the part file when it holds nothing worth resuming.
    func removeIfEmpty() {
        if size == 0 { remove() }
    }
}
