import FoundationEssentials
import Glibc

/// Opening the files that clients name, without the traps a hostile or careless client can
/// set in a shared directory:
/// - a FIFO (or a device) where a file is expected: a plain open() of a FIFO waits until
///   someone opens the other end, holding whatever thread called it. Every open here is
///   O_NONBLOCK, so it returns at once, and anything that is not a regular file is refused
///   before any thread can wait on it.
/// - a symbolic link in the last component of a file the daemon writes: it would write
///   through the link, outside `--allow-dir`. Writes use O_NOFOLLOW and refuse a file with
///   other hard links (which O_NOFOLLOW cannot see).
/// - predictable temporary names: `createTemporary` makes names mkstemp-style (O_EXCL, a
///   random suffix), so a planted link or file under the name is never used.
public enum LocalFile {
    /// Opens a regular file for reading; `followLinks` false also refuses a symbolic link.
    public static func openForReading(_ path: String, followLinks: Bool = true) throws(TransferFileError) -> Int32 {
        let flags = O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC | (followLinks ? 0 : O_NOFOLLOW)
        return try checked(open(path, flags), path: path, writing: false)
    }

    /// Opens a regular file for writing, creating it (with `mode`) when it is missing, never
    /// through a symbolic link.
    public static func openForWriting(_ path: String, mode: UInt32 = 0o644) throws(TransferFileError) -> Int32 {
        let flags = O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC
        return try checked(open(path, flags, mode_t(mode)), path: path, writing: true)
    }

    /// Creates a new file `<directory>/.<name>.<6 random characters>` (mode 0600, O_EXCL)
    /// that nothing else had: the descriptor and the name.
    public static func createTemporary(in directory: String, for name: String) throws(TransferFileError) -> (Int32, String) {
        var template = Array("\(directory)/.\(name).XXXXXX".utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        let path = String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
        if fd >= 0 { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        guard fd >= 0 else { throw TransferFileError(path: path, detail: String(cString: strerror(errno))) }
        return (fd, path)
    }

    /// Replaces `<directory>/<name>` atomically with `bytes`: a new temporary file next to
    /// it, written and fsynced, renamed over the old name (a link there is replaced, never
    /// written through), then the directory fsynced. A reader or a crash sees the old file or
    /// the new one, never half of one.
    public static func replace(_ name: String, in directory: String, with bytes: [UInt8], mode: UInt32 = 0o600) throws(TransferFileError) {
        let path = directory + "/" + name
        let (fd, temporary) = try createTemporary(in: directory, for: name)
        var failure: String? = nil
        // mkstemp makes it 0600; anything wider is asked for.
        if mode != 0o600 && fchmod(fd, mode_t(mode)) != 0 { failure = "chmod: \(String(cString: strerror(errno)))" }
        var written = 0
        while failure == nil && written < bytes.count {
            let n = bytes[written...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { failure = "write: \(String(cString: strerror(errno)))"; break }
            written += n
        }
        if failure == nil && fsync(fd) != 0 { failure = "fsync: \(String(cString: strerror(errno)))" }
        close(fd)
        if failure == nil && rename(temporary, path) != 0 { failure = "rename: \(String(cString: strerror(errno)))" }
        if let failure {
            unlink(temporary)
            throw TransferFileError(path: path, detail: failure)
        }
        syncDirectory(directory)
    }

    /// The whole of a regular file, or nil when there is none (ENOENT).
    public static func contents(of path: String) throws(TransferFileError) -> [UInt8]? {
        let opened = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)
        if opened < 0 && errno == ENOENT { return nil }
        let fd = try checked(opened, path: path, writing: false)
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else { throw TransferFileError(path: path, detail: String(cString: strerror(errno))) }
            if n == 0 { return bytes }
            bytes += chunk[0..<n]
        }
    }

    /// fsync of a directory, so the names in it are durable.
    public static func syncDirectory(_ directory: String) {
        let fd = open(directory.isEmpty ? "." : directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return }
        fsync(fd)
        close(fd)
    }

    /// The file's identity, to check later that a name still means the file written.
    public struct Identity: Equatable, Sendable {
        let device: UInt64
        let inode: UInt64
    }

    public static func identity(of fd: Int32) -> Identity? {
        var info = stat()
        guard fstat(fd, &info) == 0 else { return nil }
        return Identity(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
    }

    /// The identity of what `path` names, without following a link.
    public static func identity(ofPath path: String) -> Identity? {
        var info = stat()
        guard lstat(path, &info) == 0 else { return nil }
        return Identity(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
    }

    /// Makes `fd` known under `path` too (the exact file written, whatever its old name now
    /// names): linkat through /proc/self/fd. Fails with EEXIST when `path` exists.
    public static func link(_ fd: Int32, to path: String) -> Int32 {
        linkat(AT_FDCWD, "/proc/self/fd/\(fd)", AT_FDCWD, path, AT_SYMLINK_FOLLOW)
    }

    private static func checked(_ fd: Int32, path: String, writing: Bool) throws(TransferFileError) -> Int32 {
        guard fd >= 0 else {
            let reason: String
            switch errno {
            case ELOOP: reason = "is a symbolic link; the daemon does not write through links"
            case ENXIO: reason = "not a regular file (a FIFO or socket)"
            default: reason = String(cString: strerror(errno))
            }
            throw TransferFileError(path: path, detail: reason)
        }
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw TransferFileError(path: path, detail: reason)
        }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            close(fd)
            throw TransferFileError(path: path, detail: "not a regular file (\(kindName(info.st_mode)))")
        }
        guard !writing || info.st_nlink <= 1 else {
            close(fd)
            throw TransferFileError(path: path, detail: "has \(info.st_nlink) hard links; the daemon writes only files of its own")
        }
        // Reads and writes of a regular file block as usual from here.
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)
        return fd
    }

    static func kindName(_ mode: mode_t) -> String {
        switch mode & S_IFMT {
        case S_IFIFO: "a FIFO"
        case S_IFDIR: "a directory"
        case S_IFCHR: "a character device"
        case S_IFBLK: "a block device"
        case S_IFSOCK: "a socket"
        case S_IFLNK: "a symbolic link"
        default: "not a file"
        }
    }
}
