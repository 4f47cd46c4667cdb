internal import CLinux
import Glibc

/// A descriptor a client passed (`bodyTo`, `bodyFrom`) could not be used.
public struct DescriptorError: Error, Sendable, Equatable {
    public let detail: String

    public init(_ detail: String) {
        self.detail = detail
    }
}

/// How a passed descriptor is written or read without ever changing its flags: its file
/// description is shared with the client (its stdout, its stdin), so O_NONBLOCK is never set.
enum PassedDescriptor {
    enum Kind {
        /// A regular file or a block device: a write or read ends within the disk's time.
        case file
        /// A pipe, a socket, a terminal: may wait for the other end without bound, so it is
        /// waited for with poll (and a wake-up descriptor), never inside a write or a read.
        case stream(isSocket: Bool)
    }

    /// The descriptor's kind, once it is checked to be open for `writing` (else for reading).
    static func kind(of fd: Int32, writing: Bool) throws(DescriptorError) -> Kind {
        var flags: Int32 = 0
        let kind = fetchd_descriptor_kind(fd, &flags)
        guard kind > 0 else { throw DescriptorError("descriptor \(fd): \(String(cString: strerror(-kind)))") }
        let mode = flags & O_ACCMODE
        if writing && mode == O_RDONLY { throw DescriptorError("the descriptor is not open for writing") }
        if !writing && mode == O_WRONLY { throw DescriptorError("the descriptor is not open for reading") }
        return kind == 1 ? .file : .stream(isSocket: kind == 3)
    }

    /// A job that used a descriptor has ended: `closeNow` (no thread ever ran) closes it and
    /// its wake-up descriptor here; else the thread is woken, and closes them as it stops.
    static func release(_ fd: Int32, wake wakeFD: Int32, closeNow: Bool, wakeThread: () -> Void) {
        if closeNow {
            Glibc.close(fd)
            Glibc.close(wakeFD)
        } else {
            _ = fetchd_wake(wakeFD)
            wakeThread()
        }
    }
}

/// What a descriptor's thread and its job share about stopping (`DescriptorSink`,
/// `DescriptorSource`).
protocol DescriptorThreadState {
    /// A thread was started: it closes the descriptor when it stops.
    var started: Bool { get }
    var stopping: Bool { get set }
    var closed: Bool { get set }
}

extension DescriptorThreadState {
    /// Asks the thread to stop; true when none runs and the caller is to close the descriptor.
    mutating func stop() -> Bool {
        stopping = true
        guard !started, !closed else { return false }
        closed = true
        return true
    }
}

/// Writes a streamed response body to a descriptor a client passed (`bodyTo: "fd"`), in order,
/// from a thread of its own: the engine thread only gathers the pieces into blocks and hands
/// them over, as a download's `DownloadSink` does, and pauses the transfer while more than
/// `maxPendingBytes` wait (a reader that does not read pauses that transfer, and nothing
/// else). Writes to a pipe or a socket never wait inside the call (RWF_NOWAIT, MSG_DONTWAIT:
/// the descriptor's flags are not touched); the thread waits in poll, beside a wake-up
/// descriptor, so a cancel or the job's end stops it at once even when nobody reads. A
/// regular file is written with plain writes. The thread hashes what it wrote (`sha256`)
/// and, once stopped, closes the descriptor: never while a write may still use it.
public final class DescriptorSink: @unchecked Sendable {
    static let blockBytes = 512 << 10
    static let maxPendingBytes = 4 << 20
    /// libcurl's CURL_MAX_WRITE_SIZE: a shorter piece ends one read from the socket.
    static let largestPiece = 16 << 10

    private let fd: Int32
    private let wakeFD: Int32
    private let kind: PassedDescriptor.Kind
    /// Engine thread only: the block being gathered.
    private var block: BodyBlock?
    private let state = Locked(State())

    private struct State: DescriptorThreadState {
        var queue: [BodyBlock] = []
        /// Capacity of the blocks handed over and not written yet.
        var pendingBytes = 0
        var writing = false
        var started = false
        var stopping = false
        var abandoned = false
        var closed = false
        var failure: TransferError?
        var taken: Int64 = 0
        var written: Int64 = 0
        var hasher = SHA256()
        var digest: String?
        var spares: [BodyBlock] = []
        var resume: (@Sendable () -> Void)?
        var whenWritten: [@Sendable (TransferError?) -> Void] = []
    }

    /// Takes ownership of `descriptor` (closed by `close`, or when this is freed).
    public init(descriptor: Int32) throws(DescriptorError) {
        kind = try PassedDescriptor.kind(of: descriptor, writing: true)
        let wake = fetchd_eventfd()
        guard wake >= 0 else { throw DescriptorError("eventfd: \(String(cString: strerror(errno)))") }
        fd = descriptor
        wakeFD = wake
    }

    deinit {
        // Only when no thread runs any more (the thread holds this sink).
        let closed = state.withLock { $0.closed }
        if !closed {
            Glibc.close(fd)
            Glibc.close(wakeFD)
        }
    }

    /// Why writing stopped (the reader gone, another write error).
    public var failure: TransferError? { state.withLock { $0.failure } }
    /// Bytes handed over to be written.
    public var bytesTaken: Int64 { state.withLock { $0.taken } }
    /// Bytes written so far.
    public var bytesWritten: Int64 { state.withLock { $0.written } }
    /// The SHA-256 of what was written (lowercase hex), once the thread has stopped or
    /// `whenWritten` has called back; before that, of what was written so far.
    public var sha256: String {
        state.withLock { s in
            if let digest = s.digest { return digest }
            var copy = s.hasher
            return copy.finishHex()
        }
    }

    // MARK: the engine thread's side

    /// A piece of the body: gathered, and handed over at the end of each read from the
    /// socket (a piece shorter than libcurl's largest) or when a block is full.
    public func write(_ bytes: UnsafeRawBufferPointer, resume: @escaping @Sendable () -> Void) -> BodyTake {
        if block == nil {
            // The backlog grows only when a block is handed over: asked once per block.
            let (failed, behind) = state.withLock { s -> (Bool, Bool) in
                if s.failure != nil || s.abandoned || s.stopping { return (true, false) }
                guard s.pendingBytes > Self.maxPendingBytes else { return (false, false) }
                s.resume = resume
                return (false, true)
            }
            if failed { return .stop }
            if behind { return .pause }
        }
        var rest = bytes
        while !rest.isEmpty {
            let block = self.block ?? state.withLock({ $0.spares.popLast() }) ?? BodyBlock(capacity: Self.blockBytes)
            self.block = block
            let take = min(rest.count, block.room)
            block.append(UnsafeRawBufferPointer(rebasing: rest.prefix(take)))
            rest = UnsafeRawBufferPointer(rebasing: rest.dropFirst(take))
            if block.room == 0 { handOver() }
        }
        if bytes.count < Self.largestPiece { handOver() }
        return .all
    }

    /// Hands the gathered bytes over (the end of a transfer).
    public func flush() {
        handOver()
    }

    /// Any thread: all of `bytes` (a body that was kept in memory), without pausing anyone.
    public func write(all bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let block = BodyBlock(capacity: min(Self.blockBytes, bytes.count - offset))
            bytes.withUnsafeBytes { all in
                block.append(UnsafeRawBufferPointer(rebasing: all[offset..<(offset + block.capacity)]))
            }
            offset += block.capacity
            enqueue(block)
        }
    }

    private func handOver() {
        guard let block, block.count > 0 else { return }
        self.block = nil
        enqueue(block)
    }

    private func enqueue(_ block: BodyBlock) {
        let start = state.withLock { s -> Bool in
            guard !s.abandoned, !s.stopping, s.failure == nil else { return false }
            s.queue.append(block)
            s.pendingBytes += block.capacity
            s.taken += Int64(block.count)
            defer { s.started = true }
            return !s.started
        }
        if start {
            NamedThread.start("fetchd-bodyto") { [self] in run() }
        } else {
            wakeWriter()
        }
    }

    /// Calls `done` once every block handed over is written, with why one was not.
    public func whenWritten(_ done: @escaping @Sendable (TransferError?) -> Void) {
        let now = state.withLock { s -> TransferError?? in
            if s.abandoned { return .some(TransferError(.cancelled, "cancelled")) }
            if s.failure != nil || (s.queue.isEmpty && !s.writing) { return .some(s.failure) }
            s.whenWritten.append(done)
            return nil
        }
        if let now { done(now) }
    }

    /// Stops writing now: what waits is dropped, a write waiting for the reader gives up,
    /// and a `whenWritten` still owed hears of a cancel.
    public func abandon() {
        let waiting = state.withLock { s -> [@Sendable (TransferError?) -> Void] in
            s.abandoned = true
            s.queue.removeAll()
            s.pendingBytes = 0
            defer { s.whenWritten = [] }
            return s.whenWritten
        }
        _ = fetchd_wake(wakeFD)
        wakeWriter()
        for done in waiting { done(TransferError(.cancelled, "cancelled")) }
    }

    /// The job has ended: nothing more is written, and the descriptor is closed once the
    /// thread has stopped (at once when none runs). Idempotent.
    public func close() {
        let closeNow = state.withLock { s -> Bool in
            s.queue.removeAll()
            return s.stop()
        }
        PassedDescriptor.release(fd, wake: wakeFD, closeNow: closeNow) { wakeWriter() }
    }

    // MARK: the writer thread

    private let signal = Condition()

    private func wakeWriter() {
        signal.broadcast()
    }

    private func run() {
        while let block = nextBlock() {
            let outcome = block.count == 0 ? nil : writeAll(block.bytes)
            let (resume, done, failure) = state.withLock { s -> ((@Sendable () -> Void)?, [@Sendable (TransferError?) -> Void], TransferError?) in
                s.writing = false
                if let outcome, s.failure == nil, !s.abandoned, !s.stopping {
                    s.failure = outcome
                } else if outcome == nil, !s.abandoned {
                    s.written += Int64(block.count)
                    s.hasher.update(block.bytes)
                }
                s.pendingBytes = max(0, s.pendingBytes - block.capacity)
                block.count = 0
                if block.capacity == Self.blockBytes, s.spares.count < Self.maxPendingBytes / Self.blockBytes { s.spares.append(block) }
                var resume: (@Sendable () -> Void)? = nil
                if s.pendingBytes <= Self.maxPendingBytes / 2 || s.failure != nil {
                    resume = s.resume
                    s.resume = nil
                }
                var done: [@Sendable (TransferError?) -> Void] = []
                if (s.queue.isEmpty || s.failure != nil) && !s.whenWritten.isEmpty {
                    done = s.whenWritten
                    s.whenWritten = []
                }
                return (resume, done, s.failure)
            }
            // A paused transfer goes on (or, after a failure, hears of it at its next piece).
            resume?()
            for callback in done { callback(failure) }
        }
        state.withLock { s in
            var hasher = s.hasher
            s.digest = hasher.finishHex()
            s.closed = true
        }
        Glibc.close(fd)
        Glibc.close(wakeFD)
    }

    /// The next block to write, waiting for one; nil: stop (the job ended, or writing failed
    /// or was abandoned and nothing more will come).
    private func nextBlock() -> BodyBlock? {
        signal.lock()
        defer { signal.unlock() }
        while true {
            let next = state.withLock { s -> (BodyBlock?, Bool) in
                if s.stopping { return (nil, true) }
                guard !s.queue.isEmpty else { return (nil, false) }
                s.writing = true
                return (s.queue.removeFirst(), false)
            }
            if let block = next.0 { return block }
            if next.1 { return nil }
            signal.wait()
        }
    }

    /// Writes all of `bytes`; nil, or why not. Gives up (nil) when abandoned or stopped.
    private func writeAll(_ bytes: UnsafeRawBufferPointer) -> TransferError? {
        var offset = 0
        var blocking: Bool
        var isSocket = false
        switch kind {
        case .file: blocking = true
        case .stream(let socket):
            blocking = false
            isSocket = socket
        }
        while offset < bytes.count {
            if state.withLock({ $0.abandoned || $0.stopping }) { return nil }
            let pointer = bytes.baseAddress! + offset
            let count = bytes.count - offset
            let n: Int
            if blocking {
                let written = Glibc.write(fd, pointer, count)
                n = written < 0 ? -Int(errno) : written
            } else {
                n = fetchd_write_nowait(fd, pointer, UInt(count), isSocket ? 1 : 0)
            }
            if n >= 0 {
                offset += n
                continue
            }
            switch Int32(-n) {
            case EINTR:
                continue
            case EAGAIN:
                // No room now (or the client made its descriptor non-blocking): wait for
                // the reader, or for a cancel.
                let ready = fetchd_wait_ready(fd, 1, wakeFD)
                if ready < 0 { return Self.failure(-ready) }
            case EOPNOTSUPP where !blocking, EINVAL where !blocking:
                blocking = true  // this kind of file cannot write without waiting: a plain write
            case let code:
                return Self.failure(code)
            }
        }
        return nil
    }

    static func failure(_ code: Int32) -> TransferError {
        if code == EPIPE { return TransferError(.write, "the reader of bodyTo is gone (EPIPE)") }
        return TransferError(.write, "writing to bodyTo: \(String(cString: strerror(code)))")
    }
}

/// A pthread condition variable with its mutex (the writer thread's wait for blocks).
final class Condition: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    init() {
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(condition, nil)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    func lock() { pthread_mutex_lock(mutex) }
    func unlock() { pthread_mutex_unlock(mutex) }
    /// Locked: waits for a broadcast.
    func wait() { pthread_cond_wait(condition, mutex) }

    /// Wakes every waiter; taking the mutex first, so that a waiter between its check and its
    /// wait cannot miss it.
    func broadcast() {
        pthread_mutex_lock(mutex)
        pthread_cond_broadcast(condition)
        pthread_mutex_unlock(mutex)
    }
}
