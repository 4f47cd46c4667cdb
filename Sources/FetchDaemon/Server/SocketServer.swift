import FetchEngine
import Dispatch
import FoundationEssentials
import Glibc
internal import CLinux
import JSONRPC
import Synchronization

/// The Unix socket: created mode 0600, served to peers with our uid (or root) only, one
/// epoll loop per engine thread that serves it: the first also accepts, and each new
/// connection is served by the next loop in turn, on that loop's thread alone.
final class SocketServer: Sendable {
    let path: String
    private let listenFD: Int32
    /// Whether the socket file is ours to remove at exit (not when systemd passed the socket).
    private let ownsPath: Bool
    /// One per thread that drives the server (`start`); the first accepts.
    private let loops: [EventLoop]
    private var loop: EventLoop { loops[0] }
    private let hooks: Connection.Hooks
    private let log: Logger
    /// The process behind each connection (jobEvent names it).
    private let clients: ClientDirectory
    private let connections = Locked<[UInt64: Connection]>([:])
    private let nextID = Atomic<UInt64>(1)
    private let acceptedTotal = Atomic<Int>(0)
    /// Whether the listening socket is open (loop thread): a paused accept re-arms only then.
    private let listening = Atomic<Bool>(true)
    /// Whether the listening socket is left alone after a failed accept().
    private let acceptPaused = Atomic<Bool>(false)
    /// When an accept() failure was last logged; whether one was and no success since.
    private let acceptLogThrottle = Locked(LogThrottle<ContinuousClock.Instant>(interval: SocketServer.acceptLogInterval))
    private let acceptFailureAnnounced = Atomic<Bool>(false)

    /// How long the listening socket is left alone after accept() fails for want of
    /// descriptors (EMFILE, ENFILE) or memory: the connection stays in the backlog, and
    /// polling a socket that stays readable would spin.
    static let acceptPauseMilliseconds = 100
    /// Such failures are logged at most once per this interval.
    static let acceptLogInterval = Duration.seconds(10)

    /// Binds the socket. A live daemon on the path is an error; a stale socket file is
    /// replaced; any other file there is left alone and is an error.
    /// `passed`: a listening socket systemd made (socket activation), served as it is; its
    /// file is systemd's and stays when the daemon stops.
    init(path: String, hooks: Connection.Hooks, log: Logger, passed: Int32? = nil, clients: ClientDirectory = ClientDirectory(),
         threads: Int = 1) throws {
        self.path = path
        self.clients = clients
        self.hooks = hooks
        self.log = log
        if let passed {
            listenFD = passed
            ownsPath = false
        } else {
            try SocketServer.clearStaleSocket(at: path)
            listenFD = try SocketServer.bindListener(at: path)
            ownsPath = true
        }
        loops = try (0..<max(1, threads)).map { _ in try EventLoop() }
    }

    /// Runs `block` on the thread that serves the socket (the watchdog's ping proves it runs).
    func onLoop(_ block: @escaping @Sendable () -> Void) {
        loop.execute(block)
    }

    var connectionCount: Int { connections.withLock { $0.count } }

    /// Waits on a descriptor on thread `thread` (of the `threads` given at init) and calls
    /// back there when it is readable.
    typealias Driver = (_ thread: Int, _ fd: Int32, _ onReadable: @escaping @Sendable () -> Void,
                        _ beforeWait: @escaping @Sendable () -> Void) -> Void

    /// Starts serving on the threads of `driver` (the engine's, so that a request read and
    /// the transfer it starts need no hop between threads).
    func start(drivenBy driver: Driver) {
        loop.execute { [self] in
            loop.register(listenFD, events: FETCHD_EPOLLIN) { [self] _ in acceptAll() }
        }
        for (index, events) in loops.enumerated() {
            driver(index, events.pollFD, { events.runReady() }, { events.cork.flushAndHold() })
        }
    }

    /// Stops accepting and removes the socket file; connections stay until `closeAll`.
    func stopListening() {
        let done = DispatchSemaphore(value: 0)
        loop.execute { [self] in
            listening.store(false, ordering: .relaxed)
            loop.unregister(listenFD)
            close(listenFD)
            done.signal()
        }
        done.wait()
        if ownsPath { unlink(path) }
    }

    /// Whether every connection has been sent everything it is owed.
    var allDrained: Bool { connections.withLock { $0.values.allSatisfy(\.isDrained) } }

    func closeAll() {
        let all = connections.withLock { Array($0.values) }
        let done = DispatchSemaphore(value: 0)
        for events in loops {
            // Each connection is closed on the thread of its own loop.
            events.execute {
                for connection in all where connection.loop === events { connection.forceClose() }
                done.signal()
            }
        }
        for _ in loops { done.wait() }
        for events in loops { events.stop() }
    }

    // MARK: accepting (loop thread)

    private func acceptAll() {
        while true {
            let fd = fetchd_accept(listenFD)
            if fd < 0 {
                let code = errno
                // ECONNABORTED: that peer gave up before we took it; the next may be there.
                if code == EINTR || code == ECONNABORTED { continue }
                if code != EAGAIN && code != EWOULDBLOCK { pauseAccepting(after: code) }
                return
            }
            noteAcceptWorks()
            guard let peer = SocketServer.peerCredentials(fd), peer.uid == getuid() || peer.uid == 0 else {
                let who = SocketServer.peerCredentials(fd).map { "uid \($0.uid), pid \($0.pid)" } ?? "unknown peer"
                log.warning("refused a connection from \(who): only uid \(getuid()) and root are served")
                close(fd)
                continue
            }
            let id = nextID.add(1, ordering: .relaxed).oldValue
            let connectionHooks = Connection.Hooks(
                prepare: hooks.prepare, answer: hooks.answer, maxMessageBytes: hooks.maxMessageBytes,
                unfinishedLines: hooks.unfinishedLines, cork: hooks.cork, tasks: hooks.tasks,
                opened: hooks.opened, vanished: hooks.vanished,
                closed: { [weak self] id in
                    self?.connections.withLock { _ = $0.removeValue(forKey: id) }
                    self?.clients.closed(id)
                    self?.hooks.closed(id)
                    // A descriptor is free: a paused accept need not wait for its timer.
                    if let self, acceptPaused.load(ordering: .relaxed) { loop.execute { self.resumeAccepting() } }
                })
            let serving = loops[Int(id % UInt64(loops.count))]
            let connection = Connection(id: id, fd: fd, loop: serving, hooks: connectionHooks)
            connections.withLock { $0[id] = connection }
            clients.opened(id, pid: peer.pid)
            acceptedTotal.add(1, ordering: .relaxed)
            log.debug("connection \(id) from pid \(peer.pid)")
            // Its loop's handlers are that loop's thread's alone.
            if serving === loop { connection.start() } else { serving.execute { connection.start() } }
        }
    }

    /// Stops polling the listening socket until a connection closes or for a while, then
    /// tries again; logs the failure once per `acceptLogInterval`, not once per attempt.
    private func pauseAccepting(after code: Int32) {
        loop.modify(listenFD, events: 0)
        acceptPaused.store(true, ordering: .relaxed)
        if let unlogged = acceptLogThrottle.withLock({ $0.shouldLog(at: .now) }) {
            acceptFailureAnnounced.store(true, ordering: .relaxed)
            let again = unlogged > 0 ? ", \(unlogged) more times since the last such line" : ""
            log.error("accept: \(String(cString: strerror(code)))\(again) (\(connectionCount) connections, open-file limit "
                      + "\(FileLimit.current.map(String.init) ?? "unknown")); new connections wait, retried when one "
                      + "closes or after \(Self.acceptPauseMilliseconds) ms")
        }
        // The loop's own timer: no descriptor, thread or Dispatch timer needed now.
        loop.runAfter(milliseconds: Self.acceptPauseMilliseconds) { [self] in resumeAccepting() }
    }

    /// Loop thread: polls the listening socket again, if it is paused and still open.
    private func resumeAccepting() {
        guard acceptPaused.exchange(false, ordering: .relaxed), listening.load(ordering: .relaxed) else { return }
        loop.modify(listenFD, events: FETCHD_EPOLLIN)
    }

    /// Said only after a failure that was said: at most one pair of lines per interval.
    private func noteAcceptWorks() {
        guard acceptFailureAnnounced.load(ordering: .relaxed),
              acceptFailureAnnounced.exchange(false, ordering: .relaxed) else { return }
        log.notice("accepting connections again (\(connectionCount) open)")
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
