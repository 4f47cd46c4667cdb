internal import CLinux
import Glibc

/// Reads a request body from a descriptor a client passed (`bodyFrom: "fd"`) until its end,
/// or until `length` bytes when the client stated the length, from a thread of its own: the
/// engine thread's read callback only copies what the thread has read ahead (up to
/// `aheadBytes`), and pauses the transfer (CURL_READFUNC_PAUSE) while nothing is ready. The
/// thread waits for a pipe or a socket in poll, beside a wake-up descriptor, never inside a
/// read, and never changes the descriptor's flags; once stopped, it closes the descriptor.
public final class DescriptorSource: BodySource, @unchecked Sendable {
    static let aheadBytes = 1 << 20
    static let readBytes = 256 << 10

    public let length: Int64?
    private let fd: Int32
    private let wakeFD: Int32
    private let kind: PassedDescriptor.Kind
    private let state = Locked(State())
    private let signal = Condition()

    private struct State: DescriptorThreadState {
        /// Read ahead and not handed out yet, oldest first; `offset` into the first.
        var chunks: [[UInt8]] = []
        var offset = 0
        var buffered = 0
        /// Bytes read from the descriptor, and handed to the transfer.
        var read: Int64 = 0
        var consumed: Int64 = 0
        var ended = false
        var failure: TransferError?
        var started = false
        var stopping = false
        var closed = false
        var resume: (@Sendable () -> Void)?
    }

    /// Takes ownership of `descriptor` (closed by `close`, or when this is freed).
    /// `length`: the body's length, when the client stated it.
    public init(descriptor: Int32, length: Int64?) throws(DescriptorError) {
        kind = try PassedDescriptor.kind(of: descriptor, writing: false)
        let wake = fetchd_eventfd()
        guard wake >= 0 else { throw DescriptorError("eventfd: \(String(cString: strerror(errno)))") }
        fd = descriptor
        wakeFD = wake
        self.length = length
    }

    deinit {
        if !state.withLock({ $0.closed }) {
            Glibc.close(fd)
            Glibc.close(wakeFD)
        }
    }

    public var consumed: Int64 { state.withLock { $0.consumed } }
    public var failure: TransferError? { state.withLock { $0.failure } }
    public var runsOnBulkThread: Bool { true }

    /// Engine thread: what the thread has read, never a wait for more.
    public func read(into buffer: UnsafeMutableRawBufferPointer, resume: @escaping @Sendable () -> Void) -> BodyRead {
        let (result, start, wake) = state.withLock { s -> (BodyRead, Bool, Bool) in
            if s.failure != nil { return (.fail, false, false) }
            if s.buffered > 0 {
                let wasFull = s.buffered >= Self.aheadBytes
                var copied = 0
                while copied < buffer.count, let first = s.chunks.first {
                    let take = min(buffer.count - copied, first.count - s.offset)
                    first.withUnsafeBytes { bytes in
                        (buffer.baseAddress! + copied).copyMemory(from: bytes.baseAddress! + s.offset, byteCount: take)
                    }
                    copied += take
                    s.offset += take
                    if s.offset == first.count {
                        s.chunks.removeFirst()
                        s.offset = 0
                    }
                }
                s.buffered -= copied
                s.consumed += Int64(copied)
                return (.bytes(copied), false, wasFull && s.buffered < Self.aheadBytes)
            }
            if s.ended {
                if let length, s.consumed < length {
                    s.failure = TransferError(.read, "bodyFrom ended after \(s.consumed) of the \(length) bytes bodySize said")
                    return (.fail, false, false)
                }
                return (.bytes(0), false, false)
            }
            s.resume = resume
            defer { s.started = true }
            return (.pause, !s.started, false)
        }
        if start { NamedThread.start("fetchd-bodyfrom") { [self] in run() } }
        if wake { signal.broadcast() }
        return result
    }

    /// The job has ended: the thread stops and the descriptor is closed (at once when no
    /// thread runs). Idempotent.
    public func close() {
        let closeNow = state.withLock { $0.stop() }
        PassedDescriptor.release(fd, wake: wakeFD, closeNow: closeNow) { signal.broadcast() }
    }

    // MARK: the reader thread

    private func run() {
        var chunk = [UInt8](repeating: 0, count: Self.readBytes)
        while let wanted = nextRead() {
            if case .stream = kind {
                let ready = fetchd_wait_ready(fd, 0, wakeFD)
                if ready == 0 { break }  // the job ended
                if ready < 0 {
                    finish(failure: TransferError(.read, "waiting for bodyFrom: \(String(cString: strerror(-ready)))"))
                    break
                }
            }
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress!, wanted) }
            if n < 0 {
                if errno == EINTR || errno == EAGAIN { continue }  // EAGAIN: the client's own O_NONBLOCK
                finish(failure: TransferError(.read, "reading bodyFrom: \(String(cString: strerror(errno)))"))
                break
            }
            let resume = state.withLock { s -> (@Sendable () -> Void)? in
                if n == 0 {
                    s.ended = true
                } else {
                    s.chunks.append(Array(chunk[0..<n]))
                    s.buffered += n
                    s.read += Int64(n)
                    if let length, s.read >= length { s.ended = true }
                }
                defer { s.resume = nil }
                return s.resume
            }
            resume?()
            if n == 0 { break }
        }
        // A transfer still paused for more hears that there is none (the end, a failure).
        let resume = state.withLock { s -> (@Sendable () -> Void)? in
            s.closed = true
            defer { s.resume = nil }
            return s.resume
        }
        Glibc.close(fd)
        Glibc.close(wakeFD)
        resume?()
    }

    /// How many bytes to read next, once there is room; nil: stop (the end was read, the job
    /// ended, or reading failed).
    private func nextRead() -> Int? {
        signal.lock()
        defer { signal.unlock() }
        while true {
            let next = state.withLock { s -> Int?? in
                if s.stopping || s.ended || s.failure != nil { return .some(nil) }
                guard s.buffered < Self.aheadBytes else { return nil }
                var wanted = min(Self.readBytes, Self.aheadBytes - s.buffered)
                if let length { wanted = Int(min(Int64(wanted), length - s.read)) }
                if wanted == 0 {
                    s.ended = true
                    return .some(nil)
                }
                return .some(wanted)
            }
            if let next { return next }
            signal.wait()
        }
    }

    private func finish(failure: TransferError) {
        let resume = state.withLock { s -> (@Sendable () -> Void)? in
            if s.failure == nil && !s.stopping { s.failure = failure }
            defer { s.resume = nil }
            return s.resume
        }
        resume?()
    }
}
