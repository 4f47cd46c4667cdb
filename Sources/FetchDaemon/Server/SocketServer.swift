import FetchEngine
import Dispatch
import FoundationEssentials
import Glibc
internal import CLinux
import JSONRPC
import Synchronization

/// The Unix socket: created mode 0600, served to peers with our uid (or root) only, one
/// epoll loop for every connection.
final class SocketServer: Sendable {
    let path: String
    private let listenFD: Int32
    private let loop: EventLoop
    private let hooks: Connection.Hooks
    private let log: Logger
    private let connections = Locked<[UInt64: Connection]>([:])
    private let nextID = Atomic<UInt64>(1)
    private let acceptedTotal = Atomic<Int>(0)

    /// Binds the socket. A live daemon on the path is an error; a stale socket file is
    /// replaced; any other file there is left alone and is an error.
    init(path: String, hooks: Connection.Hooks, log: Logger) throws {
        self.path = path
        self.hooks = hooks
        self.log = log
        try SocketServer.clearStaleSocket(at: path)
        listenFD = try SocketServer.bindListener(at: path)
        loop = try EventLoop()
    }

    var connectionCount: Int { connections.withLock { $0.count } }

    /// Waits on a descriptor and calls back on its own thread when it is readable.
    typealias Driver = (_ fd: Int32, _ onReadable: @escaping @Sendable () -> Void) -> Void

    /// Starts serving on the thread of `driver` (the engine's, so that a request read and
    /// the transfer it starts need no hop between threads).
    func start(drivenBy driver: Driver) {
        loop.execute { [self] in
            loop.register(listenFD, events: FETCHD_EPOLLIN) { [self] _ in acceptAll() }
        }
        let events = loop
        driver(events.pollFD) { events.runReady() }
    }

    /// Stops accepting and removes the socket file; connections stay until `closeAll`.
    func stopListening() {
        let done = DispatchSemaphore(value: 0)
        loop.execute { [self] in
            loop.unregister(listenFD)
            close(listenFD)
            done.signal()
        }
        done.wait()
        unlink(path)
    }

    /// Whether every connection has been sent everything it is owed.
    var allDrained: Bool { connections.withLock { $0.values.allSatisfy(\.isDrained) } }

    func closeAll() {
        let done = DispatchSemaphore(value: 0)
        loop.execute { [self] in
            for connection in connections.withLock({ Array($0.values) }) { connection.forceClose() }
            done.signal()
        }
        done.wait()
        loop.stop()
    }

    // MARK: accepting (loop thread)

    private func acceptAll() {
        while true {
            let fd = fetchd_accept(listenFD)
            if fd < 0 {
                if errno == EINTR { continue }
                if errno != EAGAIN && errno != EWOULDBLOCK { log.error("accept: \(String(cString: strerror(errno)))") }
                return
            }
            guard let peer = SocketServer.peerCredentials(fd), peer.uid == getuid() || peer.uid == 0 else {
                let who = SocketServer.peerCredentials(fd).map { "uid \($0.uid), pid \($0.pid)" } ?? "unknown peer"
                log.warning("refused a connection from \(who): only uid \(getuid()) and root are served")
                close(fd)
                continue
            }
            let id = nextID.add(1, ordering: .relaxed).oldValue
            let connectionHooks = Connection.Hooks(
                prepare: hooks.prepare, answer: hooks.answer, maxMessageBytes: hooks.maxMessageBytes,
                unfinishedLines: hooks.unfinishedLines, tasks: hooks.tasks,
                opened: hooks.opened, vanished: hooks.vanished,
                closed: { [weak self] id in
                    self?.connections.withLock { _ = $0.removeValue(forKey: id) }
                    self?.hooks.closed(id)
                })
            let connection = Connection(id: id, fd: fd, loop: loop, hooks: connectionHooks)
            connections.withLock { $0[id] = connection }
            acceptedTotal.add(1, ordering: .relaxed)
            log.debug("connection \(id) from pid \(peer.pid)")
            connection.start()
        }
    }

    struct PeerCredentials {
        var pid: Int32 = 0
        var uid: UInt32 = 0
    }

    private static func peerCredentials(_ fd: Int32) -> PeerCredentials? {
        var credentials = PeerCredentials()
        guard fetchd_peer_credentials(fd, &credentials.pid, &credentials.uid) == 0 else { return nil }
        return credentials
    }

    // MARK: setting up the socket file

    static let maxPathBytes = MemoryLayout.size(ofValue: sockaddr_un().sun_path) - 1

    private static func clearStaleSocket(at path: String) throws {
        var info = stat()
        guard lstat(path, &info) == 0 else { return }
        guard (info.st_mode & S_IFMT) == S_IFSOCK else {
            throw StartupError("\(path) exists and is not a socket; not touching it")
        }
        if let probe = try? connectProbe(path) {
            close(probe)
            throw StartupError("another fetchd is already listening on \(path)")
        }
        unlink(path)
    }

    private static func connectProbe(_ path: String) throws -> Int32 {
        let fd = fetchd_unix_socket(0)
        guard fd >= 0 else { throw SystemError.last("socket") }
        var address = try socketAddress(path)
        let status = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard status == 0 else {
            let error = SystemError.last("connect")
            close(fd)
            throw error
        }
        return fd
    }

    private static func bindListener(at path: String) throws -> Int32 {
        let fd = fetchd_unix_socket(1)
        guard fd >= 0 else { throw SystemError.last("socket") }
        var address = try socketAddress(path)
        // The file is born 0600: no window in which another user could connect.
        let oldMask = umask(0o177)
        let status = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        umask(oldMask)
        guard status == 0 else {
            let error = SystemError.last("bind \(path)")
            close(fd)
            throw StartupError(error.description)
        }
        chmod(path, 0o600)
        guard listen(fd, 1024) == 0 else {
            let error = SystemError.last("listen")
            close(fd)
            unlink(path)
            throw StartupError(error.description)
        }
        return fd
    }

    private static func socketAddress(_ path: String) throws -> sockaddr_un {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count <= maxPathBytes else {
            throw StartupError("socket path is \(bytes.count) bytes; the limit is \(maxPathBytes): \(path)")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { buffer in
            buffer.copyBytes(from: bytes)
            buffer[bytes.count] = 0
        }
        return address
    }
}

/// A reason the daemon cannot start, said in one line.
public struct StartupError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
