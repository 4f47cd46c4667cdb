import FoundationEssentials
import Glibc

/// Where the socket lives: `--socket PATH`, else `$FETCHD_SOCKET`, else
/// `$XDG_RUNTIME_DIR/fetchd.sock`, else `/tmp/fetchd-<uid>/fetchd.sock`.
///
/// The fallback is inside a private directory, not a name in /tmp itself: anyone can create
/// a name in /tmp first, and a socket there could be another user's listener (which then
/// receives every client's requests, Authorization headers included). The directory is made
/// 0700 by the daemon and checked before the socket is bound (`preparePrivateDirectory`).
public enum SocketPath {
    public static func resolve(flag: String?, environment: [String: String], uid: UInt32) -> String {
        if let flag, !flag.isEmpty { return flag }
        if let path = environment["FETCHD_SOCKET"], !path.isEmpty { return path }
        if let runtime = environment["XDG_RUNTIME_DIR"], !runtime.isEmpty { return runtime + "/fetchd.sock" }
        return fallbackDirectory(uid: uid) + "/fetchd.sock"
    }

    /// `/tmp/fetchd-<uid>`: the private directory of the fallback path.
    public static func fallbackDirectory(uid: UInt32) -> String { "/tmp/fetchd-\(uid)" }

    /// Makes sure the fallback directory is usable when `socketPath` is inside it (whoever
    /// chose the path); any other path is left to the socket server.
    public static func prepare(socketPath: String, uid: UInt32) throws(StartupError) {
        let directory = fallbackDirectory(uid: uid)
        guard PathText.directory(of: socketPath) == directory else { return }
        try preparePrivateDirectory(directory, uid: uid)
    }

    /// Creates `directory` with mode 0700 when it is missing, then refuses it unless it is a
    /// real directory (not a symbolic link) owned by `uid` with no access for group or others.
    /// The checks are made on a descriptor opened with O_NOFOLLOW, so the directory cannot be
    /// swapped between the check and the open; once it is ours and 0700, nobody else (but root)
    /// can rename or replace it in the sticky /tmp, so the socket bound in it stays ours.
    public static func preparePrivateDirectory(_ directory: String, uid: UInt32, what: String = "socket directory",
                                               fix: String = "remove it, or choose another path with --socket or $FETCHD_SOCKET")
        throws(StartupError) {
        // mkdir never follows a symbolic link in its last component: a planted link is EEXIST.
        if mkdir(directory, 0o700) != 0 && errno != EEXIST {
            throw StartupError("cannot create the \(what) \(directory): \(String(cString: strerror(errno)))")
        }
        var named = stat()
        guard lstat(directory, &named) == 0 else {
            throw StartupError("cannot examine the \(what) \(directory): \(String(cString: strerror(errno)))")
        }
        if (named.st_mode & S_IFMT) == S_IFLNK {
            throw StartupError("the \(what) \(directory) is a symbolic link; refusing to use it (\(fix))")
        }
        try check(named, directory: directory, uid: uid, what: what, fix: fix)
        let fd = open(directory, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else {
            throw StartupError("cannot open the \(what) \(directory): \(String(cString: strerror(errno))) (\(fix))")
        }
        defer { close(fd) }
        var opened = stat()
        guard fstat(fd, &opened) == 0 else {
            throw StartupError("cannot examine the \(what) \(directory): \(String(cString: strerror(errno)))")
        }
        guard opened.st_dev == named.st_dev && opened.st_ino == named.st_ino else {
            throw StartupError("the \(what) \(directory) was replaced while it was being checked; refusing to use it")
        }
        try check(opened, directory: directory, uid: uid, what: what, fix: fix)
    }

    private static func check(_ info: stat, directory: String, uid: UInt32, what: String, fix: String) throws(StartupError) {
        guard (info.st_mode & S_IFMT) == S_IFDIR else {
            throw StartupError("\(directory) exists and is not a directory; it cannot be the \(what) (\(fix))")
        }
        guard info.st_uid == uid else {
            throw StartupError("the \(what) \(directory) is owned by uid \(info.st_uid), not by uid \(uid) (\(fix))")
        }
        let mode = info.st_mode & 0o7777
        guard mode & 0o077 == 0 else {
            throw StartupError("the \(what) \(directory) has mode 0\(String(mode, radix: 8)): group or others "
                + "can reach it; it must be 0700 (chmod 700 \(directory), or \(fix))")
        }
    }
}
