internal import CLinux
import FetchEngine
import FoundationEssentials
import Glibc

/// A download's `<path>.part`: what is in it, and landing it under its final name.
struct PartFile: Sendable {
    let finalPath: String
    var path: String { finalPath + ".part" }

    /// Size in bytes, or nil when there is no part file.
    var size: Int64? {
        var info = stat()
        guard stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return nil }
        return Int64(info.st_size)
    }

    /// The ETag or Last-Modified of the answer the part holds (for If-Range).
    var validator: String? {
        var buffer = [CChar](repeating: 0, count: 1024)
        let n = fetchd_getxattr(path, DownloadTarget.validatorAttribute, &buffer, UInt(buffer.count - 1))
        guard n > 0 else { return nil }
        return String(decoding: buffer[0..<Int(n)].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The digest of the first `length` bytes.
    func hash(upTo length: Int64) throws -> SHA256 {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw TransferFileError(path: path, detail: String(cString: strerror(errno))) }
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

    /// fsync (when `durable`), then move to the final name: rename when replacing is
    /// allowed, otherwise a hard link that fails if something appeared there meanwhile.
    func land(overwrite: Bool, durable: Bool = true) throws {
        if durable {
            let fd = open(path, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { throw TransferFileError(path: path, detail: String(cString: strerror(errno))) }
            let synced = fsync(fd) == 0
            close(fd)
            guard synced else { throw TransferFileError(path: path, detail: "fsync: \(String(cString: strerror(errno)))") }
        }
        _ = fetchd_removexattr(path, DownloadTarget.validatorAttribute)
        if overwrite {
            guard rename(path, finalPath) == 0 else {
                throw TransferFileError(path: finalPath, detail: "rename: \(String(cString: strerror(errno)))")
            }
        } else {
            guard link(path, finalPath) == 0 else {
                let detail = errno == EEXIST ? "already exists (set overwrite to replace it)" : "link: \(String(cString: strerror(errno)))"
                throw TransferFileError(path: finalPath, detail: detail)
            }
            unlink(path)
        }
        // The directory entry itself is durable once the directory is synced.
        guard durable else { return }
        let directory = open(PathText.directory(of: finalPath), O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if directory >= 0 {
            fsync(directory)
            close(directory)
        }
    }

    func remove() {
        unlink(path)
    }

    /// Removes the part file when it holds nothing worth resuming.
    func removeIfEmpty() {
        if size == 0 { remove() }
    }
}
