import Glibc

/// A value guarded by a plain pthread mutex.
///
/// Used instead of the standard library's `Mutex`, which on Linux is a priority-inheritance
/// futex: every contended lock goes through the kernel's rt-mutex and showed up as the
/// largest cost of a `ping` in profiles. A normal mutex takes the uncontended path in user
/// space and parks briefly when contended.
///
/// The value lives behind a pointer rather than in a stored `var`: the mutex already makes
/// access exclusive, and a stored property would add the runtime's dynamic exclusivity
/// check (a thread-local access set) to every lock.
public final class Locked<Value>: @unchecked Sendable {
    private let value: UnsafeMutablePointer<Value>
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>

    public init(_ value: Value) {
        self.value = .allocate(capacity: 1)
        self.value.initialize(to: value)
        mutex = .allocate(capacity: 1)
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
        value.deinitialize(count: 1)
        value.deallocate()
    }

    @inline(__always)
    public func withLock<Result, Failure: Error>(_ body: (inout Value) throws(Failure) -> Result) throws(Failure) -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value.pointee)
    }
}
