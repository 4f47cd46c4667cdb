import FetchEngine
import Glibc

/// A fixed set of named threads that run work in the order it was handed over, and a Swift
/// `TaskExecutor`: the daemon's tasks run here, never on Swift's default global executor.
///
/// On Linux the default global executor is libdispatch's internal workqueue, which from its
/// first use keeps a monitoring timer firing once a second for the life of the process: a
/// daemon that had served one batch or one download woke every second while idle. Threads
/// waiting on a condition variable wake only for work.
final class WorkerThreads: TaskExecutor, @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    // Guarded by `mutex`: a queue read from `head`, compacted when half of it is consumed.
    private var queue: [@Sendable () -> Void] = []
    private var head = 0
    private var waiting = 0

    /// `count` threads named `name` (Linux keeps 15 bytes of a thread's name).
    init(name: String, count: Int) {
        precondition(count > 0)
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(condition, nil)
        for _ in 0..<count {
            NamedThread.start(name) { [self] in run() }
        }
    }

    /// One thread per online CPU, at least two: what Swift's own pool has.
    static var defaultCount: Int { max(2, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))) }

    /// Runs `work` on one of the threads soon.
    func execute(_ work: @escaping @Sendable () -> Void) {
        pthread_mutex_lock(mutex)
        queue.append(work)
        let wake = waiting > 0
        pthread_mutex_unlock(mutex)
        if wake { pthread_cond_signal(condition) }
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        execute { [self] in job.runSynchronously(on: asUnownedTaskExecutor()) }
    }

    private func run() {
        while true {
            pthread_mutex_lock(mutex)
            while head == queue.count {
                waiting += 1
                pthread_cond_wait(condition, mutex)
                waiting -= 1
            }
            let work = queue[head]
            head += 1
            if head == queue.count {
                queue.removeAll(keepingCapacity: true)
                head = 0
            } else if head >= 1024 && head * 2 >= queue.count {
                queue.removeFirst(head)
                head = 0
            }
            pthread_mutex_unlock(mutex)
            work()
        }
    }
}
