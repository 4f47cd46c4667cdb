import FetchEngine
import FoundationEssentials
import Glibc
internal import CLinux
import Synchronization

/// A small epoll set, run by a thread that waits on `pollFD` among other things and calls
/// `runReady` when it is readable (the engine's). Handlers are registered and run on that
/// thread (asserted in debug builds); `modify` and `execute` may be called from any thread.
final class EventLoop: @unchecked Sendable {
    typealias Handler = (_ events: UInt32) -> Void

    private let epollFD: Int32
    private let wakeFD: Int32
    /// For `runAfter`: made at start, so that a timer needs no new descriptor when the
    /// process has none left.
    private let timerFD: Int32
    private let queued = Locked<[@Sendable () -> Void]>([])
    private let stopped = Atomic<Bool>(false)
    // Loop thread only.
    private let thread = OneThread()
    private var handlers: [Int32: Handler] = [:]
    private var timerBlock: (() -> Void)?
    // Filled by epoll_wait: buffers rather than arrays in stored properties, which would add
    // a dynamic exclusivity check to every wait.
    private let fds = UnsafeMutableBufferPointer<Int32>.allocate(capacity: 256)
    private let events = UnsafeMutableBufferPointer<UInt32>.allocate(capacity: 256)
    /// Answers made on the loop's thread wait here for the end of its turn (`flushAndHold`,
    /// run by the driving thread before it waits).
    let cork = WriteCork()
    /// One receive buffer for every connection: only the loop thread reads.
    let readBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 << 10, alignment: 16)

    init() throws {
        epollFD = fetchd_epoll_create()
        wakeFD = fetchd_eventfd()
        timerFD = fetchd_timerfd()
        guard epollFD >= 0, wakeFD >= 0, timerFD >= 0 else { throw SystemError.last("epoll") }
        fetchd_epoll_add(epollFD, wakeFD, FETCHD_EPOLLIN)
        fetchd_epoll_add(epollFD, timerFD, FETCHD_EPOLLIN)
    }

    deinit {
        readBuffer.deallocate()
        fds.deallocate()
        events.deallocate()
        close(epollFD)
        close(wakeFD)
        close(timerFD)
    }

    /// Readable while events wait: for the thread that drives this loop with `runReady`.
    var pollFD: Int32 { epollFD }

    /// Loop thread only.
    func register(_ fd: Int32, events: UInt32, handler: @escaping Handler) {
        assert(thread.isOwner, "an event loop's handlers are its thread's")
        handlers[fd] = handler
        fetchd_epoll_add(epollFD, fd, events)
    }

    /// Any thread.
    func modify(_ fd: Int32, events: UInt32) {
        fetchd_epoll_mod(epollFD, fd, events)
    }

    /// Loop thread only.
    func unregister(_ fd: Int32) {
        assert(thread.isOwner, "an event loop's handlers are its thread's")
        handlers[fd] = nil
        fetchd_epoll_del(epollFD, fd)
    }

    /// Runs `block` on the loop thread soon. Only the first block into an empty queue
    /// wakes the loop.
    func execute(_ block: @escaping @Sendable () -> Void) {
        let first = queued.withLock { q -> Bool in
            q.append(block)
            return q.count == 1
        }
        if first {
            var one: UInt64 = 1
            _ = write(wakeFD, &one, 8)
        }
    }

    /// Loop thread only: runs `block` on the loop thread after `milliseconds`. One timer: a
    /// later call replaces a pending one.
    func runAfter(milliseconds: Int, _ block: @escaping () -> Void) {
        assert(thread.isOwner, "an event loop's timer is its thread's")
        timerBlock = block
        fetchd_timerfd_arm(timerFD, milliseconds)
    }

    func stop() {
        stopped.store(true, ordering: .relaxed)
        execute {}
    }

    /// Handles what is ready now, without waiting (the driving thread saw `pollFD` readable).
    func runReady() {
        assert(thread.isOwner, "an event loop runs on one thread")
        guard !stopped.load(ordering: .relaxed) else { return }
        let count = fetchd_epoll_wait(epollFD, fds.baseAddress, events.baseAddress, Int32(fds.count), 0)
        guard count > 0 else { return }
        for index in 0..<Int(count) {
            let fd = fds[index]
            if fd == wakeFD {
                var value: UInt64 = 0
                _ = read(wakeFD, &value, 8)
                let blocks = queued.withLock { q -> [@Sendable () -> Void] in
                    let taken = q
                    q.removeAll()
                    return taken
                }
                for block in blocks { block() }
            } else if fd == timerFD {
                var expirations: UInt64 = 0
                _ = read(timerFD, &expirations, 8)
                let block = timerBlock
                timerBlock = nil
                block?()
            } else if let handler = handlers[fd] {
                handler(events[index])
            }
        }
    }
}
