import FetchEngine
import Glibc

/// A fixed set of named threads that run work in the order it was handed over. Idle threads
/// wait on a condition variable and wake only for work. The daemon (`Daemon`) makes three sets:
///
/// - the task threads, a Swift `TaskExecutor`: every `Task` of the daemon is created with them
///   as its executor preference and never runs on Swift's default global executor. On Linux
///   that executor is libdispatch's internal workqueue, which from its first use keeps a
///   monitoring timer firing once a second for the life of the process: a daemon that had
///   served one batch or one download woke every second while idle.
/// - the answer thread (one thread, in bursts): turns finished transfers into answers while
///   the engine thread is busy. Under load the engine hands it work in bursts (one wake-up
///   for many answers) and goes back to libcurl, so building and writing answers runs beside
///   the transfers instead of between them. An idle engine answers itself: no thread hop.
/// - the blocking-file threads: a part file's hash, fsync and landing, preparing the
///   attempts of jobs that open files the client named, reading auth rules' secret files.
///
/// The sets are shared by every client, so whatever runs on them ends within a bound: a file
/// a client or the command line names is opened only through `LocalFile` (non-blocking and
/// regular files only: never a wait for the other end of a FIFO) and read with a size bound
/// (a stub's body file, a HAR file, a secret file, a TLS file), never by a plain open() or a
/// read to the end of whatever the name turns out to be. A thread here that waited without
/// a bound would leave every other client's downloads, uploads and file reads queued.
final class WorkerThreads: TaskExecutor, @unchecked Sendable {
    typealias Burst = @Sendable (() -> Void) -> Void

    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    // Guarded by `mutex`: a queue read from `head`, compacted when half of it is consumed.
    private var queue: [@Sendable () -> Void] = []
    private var head = 0
    private var waiting = 0
    /// `count` threads named `name` (Linux keeps 15 bytes of a thread's name). With a
    /// `burst`, a thread that wakes takes everything queued and runs it inside `burst` (the
    /// daemon holds answer writes back until the end of one).
    init(name: String, count: Int, burst: Burst? = nil) {
        precondition(count > 0)
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(condition, nil)
        for _ in 0..<count {
            NamedThread.start(name) { [self] in
                if let burst { runInBursts(burst) } else { runOneAtATime() }
            }
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

    /// Locked: waits until something is queued.
    private func waitForWork() {
        while head == queue.count {
            waiting += 1
            pthread_cond_wait(condition, mutex)
            waiting -= 1
        }
    }

    private func runOneAtATime() {
        while true {
            pthread_mutex_lock(mutex)
            waitForWork()
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

    private func runInBursts(_ burst: Burst) {
        var batch: [@Sendable () -> Void] = []
        while true {
            pthread_mutex_lock(mutex)
            waitForWork()
            swap(&batch, &queue)  // `head` stays 0: bursts take the whole queue
            pthread_mutex_unlock(mutex)
            burst { for work in batch { work() } }
            batch.removeAll(keepingCapacity: true)
        }
    }
}
