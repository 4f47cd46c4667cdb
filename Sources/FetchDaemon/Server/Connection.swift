import FetchEngine
import Dispatch
import FoundationEssentials
import Glibc
internal import CLinux
import JSONRPC
import Synchronization

/// One client on the socket: reads lines on the event loop, answers from any thread.
///
/// Answers are never dropped; the bytes owed to a client that reads slowly are bounded by
/// no longer reading its requests while more than `pauseReadingAboveBytes` wait.
/// Notifications to such a client are coalesced per key (the newest progress of a job
/// replaces an older one still waiting), so they never pile up without bound.
final class Connection: Sendable {
    struct Hooks: Sendable {
        /// Answers a line at once when it can, or starts it (its answer goes to `later`), or
        /// hands back the decoded message.
        let prepare: @Sendable (_ line: [UInt8], _ context: RPCContext, _ later: @escaping @Sendable (JSONValue?) -> Void)
            -> RPCDispatcher.Prepared
        /// Answers a decoded message; nil when nothing is owed.
        let answer: @Sendable (_ message: JSONValue, _ context: RPCContext) async -> JSONValue?
        let maxMessageBytes: Int
        /// Every connection's partial lines together (shared by all connections).
        let unfinishedLines: UnfinishedLines
        /// Holds back the writes of answers made in a burst on the answer thread.
        let cork: WriteCork
        /// Where this connection's tasks run (a large line's parse, a deferred answer).
        let tasks: any TaskExecutor
        /// The connection is served from now on; its jobs' bodies count against `budget`.
        let opened: @Sendable (_ connectionID: UInt64, _ budget: BodyBudget) -> Void
        /// The peer is gone (not just half-closed): its jobs may be cancelled.
        let vanished: @Sendable (_ connectionID: UInt64) -> Void
        let closed: @Sendable (_ connectionID: UInt64) -> Void
    }

    static let pauseReadingAboveBytes = 4 << 20
    /// What one client's requests may hold in memory: bodies being received plus answers not
    /// yet read (BodyBudget). A client that sends many large fetches and never reads is held
    /// to about this, plus one answer; one that reads is never slowed by it below this.
    static let bodyBudgetBytes = 32 << 20
    let bodyBudget = BodyBudget(limit: Connection.bodyBudgetBytes)
    static let coalesceNotificationsAboveBytes = 256 << 10

    let id: UInt64
    let fd: Int32
    /// The loop (and so the thread) that serves this connection.
    let loop: EventLoop
    private let hooks: Hooks
    private let state: Locked<State>
    // Event loop thread only.
    private nonisolated(unsafe) var framer: LineFramer
    /// What this connection's partial line counts in `hooks.unfinishedLines` (loop thread only).
    private nonisolated(unsafe) var unfinishedBytes = 0
    /// Descriptors that came with a line not framed yet: the next line framed takes them
    /// (loop thread only), and its request takes them from there (`LineDescriptors`).
    private nonisolated(unsafe) var waitingDescriptors: [Int32] = []
    /// Where one read's descriptors land (loop thread only).
    private nonisolated(unsafe) var receivedDescriptors = [Int32](repeating: -1, count: 16)
    /// Descriptors received and neither taken by a request nor closed yet.
    private let heldDescriptors = Atomic<Int>(0)
    /// At most this many are held for a client; any more that come are closed at once (their
    /// request then finds none: -32602).
    static let maxHeldDescriptors = 16

    private struct State {
        var outbound = OutboundBuffer()
        var pendingNotifications: [(key: String, line: [UInt8])] = []
        var inFlight = 0
        var readClosed = false
        var readPaused = false
        var vanished = false
        var closed = false
        var interest: UInt32 = 0
        /// Answers wait in `outbound` for the end of a `WriteCork` burst.
        var heldBack = false
        /// Counts reports of `outbound`'s size to the body budget, which keeps the newest.
        var outboundVersion: UInt64 = 0
        var reportedOutbound = 0
    }

    /// What methods see of this connection, and where their answers go: made once, not
    /// per request. They hold the connection weakly.
    let context: RPCContext
    private let deliver: @Sendable (JSONValue?) -> Void

    init(id: UInt64, fd: Int32, loop: EventLoop, hooks: Hooks) {
        self.id = id
        self.fd = fd
        self.loop = loop
        self.hooks = hooks
        framer = LineFramer(maxLineBytes: hooks.maxMessageBytes)
        state = Locked(State())
        let me = WeakConnection()
        context = RPCContext(connectionID: id) { method, params in me.connection?.notify(method: method, params: params) }
        deliver = { answer in me.connection?.answered(answer) }
        me.connection = self
    }

    // Readable and peer-half-closed are level-triggered: asked for only while reading, or an
    // ended or paused reader would wake the loop forever. HUP and ERR always come.
    private static let readEvents = FETCHD_EPOLLIN | FETCHD_EPOLLRDHUP

    /// Loop thread.
    func start() {
        let events = Self.readEvents
        // Started on its loop's thread, possibly after a shutdown's forceClose got there first.
        guard state.withLock({ s -> Bool in
            guard !s.closed else { return false }
            s.interest = events
            return true
        }) else { return }
        hooks.opened(id, bodyBudget)
        loop.register(fd, events: events) { [self] events in handle(events) }
    }

    // MARK: reading (loop thread)

    private func handle(_ events: UInt32) {
        if events & (FETCHD_EPOLLIN | FETCHD_EPOLLHUP | FETCHD_EPOLLRDHUP | FETCHD_EPOLLERR) != 0 {
            readAvailable()
        }
        if events & FETCHD_EPOLLOUT != 0 {
            flush()
        }
        if events & (FETCHD_EPOLLHUP | FETCHD_EPOLLERR) != 0 {
            peerVanished()
        }
        closeIfDone()
    }

    /// Reads what one buffer holds: readiness is level-triggered, so more is reported again,
    /// and one busy client cannot hold the loop (no extra read just to see EAGAIN).
    private func readAvailable() {
        let buffer = loop.readBuffer
        while true {
            if state.withLock({ $0.readPaused || $0.readClosed || $0.closed }) { return }
            var count: Int32 = 0
            let n = receivedDescriptors.withUnsafeMutableBufferPointer { fds in
                fetchd_recv_with_fds(fd, buffer.baseAddress, UInt(buffer.count), fds.baseAddress, Int32(fds.count), &count)
            }
            if n > 0 {
                let bytes = UnsafeRawBufferPointer(rebasing: buffer[0..<Int(n)])
                if count == 0 {
                    frame(bytes)
                } else {
                    framed(bytes, with: Array(receivedDescriptors[0..<Int(count)]))
                }
                accountUnfinishedLine()
                return
            } else if n == 0 {
                state.withLock { $0.readClosed = true }
                updateInterest()
                return
            } else if n == -Int(EINTR) {
                continue
            } else if n == -Int(EAGAIN) || n == -Int(EWOULDBLOCK) {
                return
            } else {
                peerVanished()
                return
            }
        }
    }

    private func frame(_ bytes: UnsafeRawBufferPointer) {
        for event in framer.feed(bytes) { dispatch(event) }
    }

    /// Bytes that came with descriptors. The kernel ends a read with the bytes sent with
    /// descriptors (it glues earlier bytes before them, never later ones after), and a client
    /// sends a line that carries descriptors by a sendmsg of its own, starting with the line's
    /// first byte: so they belong to the last line that begins in these bytes (or, when none
    /// begins here, to the next one).
    private func framed(_ bytes: UnsafeRawBufferPointer, with fds: [Int32]) {
        let room = max(0, Self.maxHeldDescriptors - heldDescriptors.load(ordering: .relaxed))
        for extra in fds.dropFirst(room) { close(extra) }
        let kept = Array(fds.prefix(room))
        heldDescriptors.add(kept.count, ordering: .relaxed)
        let start = Self.lastLineStart(bytes, continuingLine: framer.bufferedByteCount > 0)
        frame(UnsafeRawBufferPointer(rebasing: bytes[0..<start]))
        // Descriptors whose line never came (a client that sent two sets before one line).
        closeWaitingDescriptors()
        waitingDescriptors = kept
        frame(UnsafeRawBufferPointer(rebasing: bytes[start...]))
    }

    /// Where the last line that begins in `bytes` begins; `bytes.count` when none does.
    static func lastLineStart(_ bytes: UnsafeRawBufferPointer, continuingLine: Bool) -> Int {
        var index = bytes.count - 1
        while index > 0 {
            if bytes[index - 1] == UInt8(ascii: "\n") { return index }
            index -= 1
        }
        return continuingLine ? bytes.count : 0
    }

    /// The descriptors that wait for the next line, as that line's (nil: none wait).
    private func takeWaitingDescriptors() -> LineDescriptors? {
        guard !waitingDescriptors.isEmpty else { return nil }
        defer { waitingDescriptors = [] }
        return LineDescriptors(waitingDescriptors) { [weak self] count in
            self?.heldDescriptors.subtract(count, ordering: .relaxed)
        }
    }

    private func closeWaitingDescriptors() {
        guard !waitingDescriptors.isEmpty else { return }
        for fd in waitingDescriptors { close(fd) }
        heldDescriptors.subtract(waitingDescriptors.count, ordering: .relaxed)
        waitingDescriptors = []
    }

    /// Keeps the shared count of partial lines in step; over its limit, a large partial line
    /// here is dropped and answered -32006.
    private func accountUnfinishedLine() {
        let now = framer.bufferedByteCount
        guard now != unfinishedBytes else { return }
        let over = hooks.unfinishedLines.change(by: now - unfinishedBytes)
        unfinishedBytes = now
        guard over, now > UnfinishedLines.abandonAboveBytes, framer.abandonLine() else { return }
        _ = hooks.unfinishedLines.change(by: -now)
        unfinishedBytes = 0
        send(RPCMessage.line(RPCMessage.error(id: .null, .unfinishedMessagesTooLarge(limit: hooks.unfinishedLines.limit))))
    }

    private func dispatch(_ event: LineFramer.Event) {
        let descriptors = takeWaitingDescriptors()
        switch event {
        case .tooLarge:
            descriptors?.closeUntaken()
            let error = RPCMessage.error(id: .null, .messageTooLarge(limit: hooks.maxMessageBytes))
            send(RPCMessage.line(error))
        case .line(let line):
            // Every line is in flight from here until its answer (or nothing) is delivered:
            // a started method may answer from another thread before `prepare` returns.
            state.withLock { $0.inFlight += 1 }
            // Parsing a large message is not work for the loop's thread (which also runs
            // the transfers): it goes to a task.
            if line.count > Self.parseInTaskAboveBytes {
                Task(executorPreference: hooks.tasks) { self.prepareAndAnswer(line, descriptors) }
            } else {
                prepareAndAnswer(line, descriptors)
            }
        }
    }

    static let parseInTaskAboveBytes = 256 << 10

    /// `descriptors`: those that came with the line; what its request did not take is closed
    /// once the line is answered (a started method may take them a little later, once it has
    /// checked the files it names on another thread).
    private func prepareAndAnswer(_ line: [UInt8], _ descriptors: LineDescriptors?) {
        var context = self.context
        var later = deliver
        if let descriptors {
            context.descriptors = descriptors
            let deliver = self.deliver
            later = { answer in
                descriptors.closeUntaken()
                deliver(answer)
            }
        }
        switch hooks.prepare(line, context, later) {
        case .answered(let answer):
            descriptors?.closeUntaken()
            answered(answer)
        case .started:
            break
        case .deferred(let message):
            let hooks = self.hooks
            let context = context
            Task(executorPreference: hooks.tasks) {
                let answer = await hooks.answer(message, context)
                descriptors?.closeUntaken()
                self.answered(answer)
            }
        }
    }

    /// Delivers the answer to one line (nil: nothing was owed), from any thread. Under a
    /// `WriteCork` the write waits for the end of the burst.
    private func answered(_ answer: JSONValue?) {
        let line = answer.map(RPCMessage.line)
        let cork = line == nil ? nil : loop.cork.isHolding ? loop.cork : hooks.cork.isHolding ? hooks.cork : nil
        let (gone, closing, holdBack) = state.withLock { s -> (Bool, Bool, Bool) in
            s.inFlight -= 1
            var gone = false
            var holdBack = false
            if let line, !s.vanished, !s.closed {
                s.outbound.append(line)
                if cork == nil {
                    gone = !s.outbound.flush(to: fd)
                } else if !s.heldBack {
                    s.heldBack = true
                    holdBack = true
                }
            }
            return (gone, s.readClosed && s.inFlight == 0, holdBack)
        }
        if holdBack, let cork { cork.holdBack(self) }
        if gone { loop.execute { self.peerVanished(); self.closeIfDone() } }
        if line != nil && cork == nil { updateInterest() }
        // Only a client that stopped sending may now be due to close: no wake-up of the loop
        // for every answer.
        if closing { loop.execute { self.closeIfDone() } }
    }

    // MARK: writing (any thread)

    /// Queues an answer; it is always delivered while the peer reads.
    func send(_ line: [UInt8]) {
        let gone = state.withLock { s -> Bool in
            guard !s.vanished, !s.closed else { return false }
            s.outbound.append(line)
            return !s.outbound.flush(to: fd)
        }
        if gone { loop.execute { self.peerVanished(); self.closeIfDone() } }
        updateInterest()
    }

    /// Writes the answers a `WriteCork` held back.
    func flushHeldBack() {
        let gone = state.withLock { s -> Bool in
            s.heldBack = false
            guard !s.vanished, !s.closed else { return false }
            return !s.outbound.flush(to: fd)
        }
        if gone { loop.execute { self.peerVanished(); self.closeIfDone() } }
        updateInterest()
    }

    /// Notifications of a streamed body: each one is part of what the client is owed, in
    /// order, so none is coalesced (a newer one never replaces an older one). What they hold
    /// is bounded by the connection's body budget instead (`NotificationOutlet`).
    static let inOrderNotifications: Set<String> = ["responseHead", "bodyChunk", "bodyLine", "sseEvent"]

    func notify(method: String, params: JSONValue) {
        let line = RPCMessage.line(RPCMessage.notification(method: method, params: params))
        if Self.inOrderNotifications.contains(method) { return send(line) }
        let key = method + "\u{0}" + (params["jobId"]?.stringValue ?? "")
        let queuedBehind = state.withLock { s -> Bool in
            guard !s.vanished, !s.closed else { return true }
            guard s.outbound.count > Self.coalesceNotificationsAboveBytes || !s.pendingNotifications.isEmpty else {
                return false
            }
            if let index = s.pendingNotifications.firstIndex(where: { $0.key == key }) {
                s.pendingNotifications[index].line = line
            } else {
                s.pendingNotifications.append((key, line))
            }
            return true
        }
        if !queuedBehind { send(line) } else { updateInterest() }
    }

    private func flush() {
        let gone = state.withLock { s -> Bool in
            guard !s.closed else { return false }
            if !s.outbound.flush(to: fd) { return true }
            // Coalesced notifications go out once answers have drained.
            while s.outbound.count <= Self.coalesceNotificationsAboveBytes, !s.pendingNotifications.isEmpty {
                s.outbound.append(s.pendingNotifications.removeFirst().line)
                if !s.outbound.flush(to: fd) { return true }
            }
            return false
        }
        if gone { peerVanished() }
        updateInterest()
    }

    /// Keeps epoll's interest in step with the state: write interest while bytes wait,
    /// read interest unless paused or closed.
    private func updateInterest() {
        let outbound = state.withLock { s -> (bytes: Int, version: UInt64)? in
            guard !s.closed else { return nil }
            let owed = s.outbound.count + s.pendingNotifications.count
            s.readPaused = s.outbound.count > Self.pauseReadingAboveBytes
            var events: UInt32 = 0
            if !s.readPaused && !s.readClosed && !s.vanished { events |= Self.readEvents }
            if owed > 0 && !s.vanished { events |= FETCHD_EPOLLOUT }
            if events != s.interest {
                s.interest = events
                loop.modify(fd, events: events)
            }
            // The body budget hears of every change of what waits (most answers leave at once:
            // nothing to report).
            guard s.outbound.count != s.reportedOutbound else { return nil }
            s.reportedOutbound = s.outbound.count
            s.outboundVersion &+= 1
            return (s.outbound.count, s.outboundVersion)
        }
        // Outside the lock: it may unpause transfers.
        if let outbound { bodyBudget.outboundChanged(to: outbound.bytes, version: outbound.version) }
    }

    // MARK: closing (loop thread)

    private func peerVanished() {
        let first = state.withLock { s -> Bool in
            guard !s.vanished else { return false }
            s.vanished = true
            s.readClosed = true
            s.outbound.discard()
            s.pendingNotifications.removeAll()
            return true
        }
        guard first else { return }
        // Nothing it is owed will be read: detached jobs run on unbounded.
        bodyBudget.lift()
        // HUP is reported until the descriptor is closed; stop listening before waiting for
        // the requests still running.
        loop.unregister(fd)
        hooks.vanished(id)
    }

    /// Closes once nothing more is owed: every answer written after a half-close, or every
    /// request finished after the peer vanished.
    private func closeIfDone() {
        closeOnce { s in
            s.readClosed && s.inFlight == 0 && (s.vanished || (s.outbound.isEmpty && s.pendingNotifications.isEmpty))
        }
    }

    /// Loop thread: ends the connection now (daemon shutdown).
    func forceClose() {
        closeOnce { _ in true }
    }

    /// Closes the descriptor the first time `ready` holds; later calls do nothing.
    private func closeOnce(when ready: (State) -> Bool) {
        let shouldClose = state.withLock { s -> Bool in
            guard !s.closed, ready(s) else { return false }
            s.closed = true
            return true
        }
        guard shouldClose else { return }
        if unfinishedBytes != 0 { _ = hooks.unfinishedLines.change(by: -unfinishedBytes) }
        unfinishedBytes = 0
        closeWaitingDescriptors()
        loop.unregister(fd)
        close(fd)
        hooks.closed(id)
    }

    /// Whether everything owed has been written.
    var isDrained: Bool {
        state.withLock { $0.inFlight == 0 && ($0.vanished || ($0.outbound.isEmpty && $0.pendingNotifications.isEmpty)) }
    }
}

/// Lets closures made in `Connection.init` reach it without keeping it alive.
private final class WeakConnection: @unchecked Sendable {
    // Set once, in Connection.init, before any closure can run.
    weak var connection: Connection?
}
