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
/// - a file of any size where a small one is expected: `read` takes the reader's bound and
///   refuses a larger file from its size, before a byte of it is read.
///
/// Every file a client or the command line names is opened here (stub bodies, HAR files,
/// auth, token and credential files, the config, cookie files, TLS files, bodies, downloads),
/// so no thread ever waits on the other end of a FIFO and every read ends within its bound.
/// None of it runs on an engine thread (asserted in debug builds).
public enum LocalFile {
    /// What `read` refuses.
    public enum ReadError: Error, Sendable, Equatable {
        /// Cannot be opened or read, or not a regular file.
        case file(TransferFileError)
        /// A regular file larger than the reader's bound, refused before any of it is read.
        case tooLarge(path: String, limit: Int)

        public var path: String {
            switch self {
            case .file(let error): error.path
            case .tooLarge(let path, _): path
            }
        }

        public var detail: String {
            switch self {
            case .file(let error): error.detail
            case .tooLarge(_, let limit): "larger than \(limit) bytes, the most read from such a file"
            }
        }

        /// As a file error (-32003 where the daemon answers it), the bound in its words.
        public var fileError: TransferFileError {
            if case .file(let error) = self { return error }
            return TransferFileError(path: path, detail: detail)
        }
    }

    /// Opens a regular file for reading; `followLinks` false also refuses a symbolic link.
    public static func openForReading(_ path: String, followLinks: Bool = true) throws(TransferFileError) -> Int32 {
        HTTPEngine.assertNotOnAnEngineThread()
        let flags = O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC | (followLinks ? 0 : O_NOFOLLOW)
        return try checked(open(path, flags), path: path, writing: false)
    }

    /// Opens a regular file for writing, creating it (with `mode`) when it is missing, never
    /// through a symbolic link.
    public static func openForWriting(_ path: String, mode: UInt32 = 0o644) throws(TransferFileError) -> Int32 {
        HTTPEngine.assertNotOnAnEngineThread()
        let flags = O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC
        return try checked(open(path, flags, mode_t(mode)), path: path, writing: true)
    }

    /// Creates a new file `<directory>/.<name>.<6 random characters>` (mode 0600, O_EXCL)
    /// that nothing else had: the descriptor and the name.
    public static func createTemporary(in directory: String, for name: String) throws(TransferFileError) -> (Int32, String) {
        HTTPEngine.assertNotOnAnEngineThread()
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
    /// Only a regular file (or a link, which is replaced) is replaced: a FIFO, a socket, a device
    /// or a directory under the name is left as it is, and refused.
    public static func replace(_ name: String, in directory: String, with bytes: [UInt8], mode: UInt32 = 0o600) throws(TransferFileError) {
        let path = directory + "/" + name
        var existing = stat()
        if lstat(path, &existing) == 0, existing.st_mode & S_IFMT != S_IFREG, existing.st_mode & S_IFMT != S_IFLNK {
            throw TransferFileError(path: path, detail: "not a regular file (\(kindName(existing.st_mode)))")
        }
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

    /// A file read whole, with its owner and permission bits as `fstat` gave them.
    public struct Contents: Sendable {
        public let bytes: [UInt8]
        public let owner: UInt32
        /// The permission bits (0o777 and the set-id and sticky bits).
        public let permissions: UInt32
    }

    /// The whole of a regular file of at most `limit` bytes, opened as `openForReading` is
    /// (non-blocking, regular files only), with its owner and mode: a caller that checks more (the
    /// owner, the mode) checks the file it read, not what the name meant a moment before. A
    /// larger file is refused from its size; one that grows past `limit` while it is read is
    /// refused when it does.
    public static func read(_ path: String, limit: Int, followLinks: Bool = true) throws(ReadError) -> Contents {
        let fd: Int32
        do {
            fd = try openForReading(path, followLinks: followLinks)
        } catch {
            throw .file(error)
        }
        defer { close(fd) }
        return try read(fd, path: path, limit: limit)
    }

    /// The whole of a regular file of at most `limit` bytes (as `read`), or nil when there is
    /// none (ENOENT).
    public static func contents(of path: String, limit: Int) throws(ReadError) -> [UInt8]? {
        HTTPEngine.assertNotOnAnEngineThread()
        let opened = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)
        if opened < 0 && errno == ENOENT { return nil }
        let fd: Int32
        do {
            fd = try checked(opened, path: path, writing: false)
        } catch {
            throw .file(error)
        }
        defer { close(fd) }
        return try read(fd, path: path, limit: limit).bytes
    }

    /// Checks that `path` is a regular file of at most `limit` bytes that can be opened for
    /// reading, without reading it (a file another program reads by name later).
    public static func check(_ path: String, limit: Int) throws(ReadError) {
        let fd: Int32
        do {
            fd = try openForReading(path)
        } catch {
            throw .file(error)
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw .file(TransferFileError(path: path, detail: String(cString: strerror(errno)))) }
        guard info.st_size <= limit else { throw .tooLarge(path: path, limit: limit) }
    }

    private static func read(_ fd: Int32, path: String, limit: Int) throws(ReadError) -> Contents {
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw .file(TransferFileError(path: path, detail: String(cString: strerror(errno)))) }
        guard info.st_size <= limit else { throw .tooLarge(path: path, limit: limit) }
        // Room for the size fstat gave and one byte more, to see growth past `limit`; files
        // that report no size (/proc) grow the buffer as they are read.
        var bytes = [UInt8](repeating: 0, count: Int(info.st_size) + 1)
        var count = 0
        while true {
            if count == bytes.count {
                guard count <= limit else { throw .tooLarge(path: path, limit: limit) }
                bytes.append(contentsOf: repeatElement(0, count: min(max(count, 64 << 10), limit + 1 - count)))
            }
            let n = bytes.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + count, $0.count - count) }
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else { throw .file(TransferFileError(path: path, detail: String(cString: strerror(errno)))) }
            if n == 0 { break }
            count += n
        }
        guard count <= limit else { throw .tooLarge(path: path, limit: limit) }
        bytes.removeLast(bytes.count - count)
        return Contents(bytes: bytes, owner: UInt32(info.st_uid), permissions: UInt32(info.st_mode & 0o7777))
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
