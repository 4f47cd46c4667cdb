import FetchEngine
import FoundationEssentials
import Glibc

/// One thread that turns finished transfers into answers when the engine thread is busy:
/// under load the engine hands it work in bursts (one wake-up for many answers) and goes
/// back to libcurl, so building and writing answers runs beside the transfers instead of
/// between them. An idle engine answers itself: that costs no thread hop.
final class AnswerWorker: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    // Guarded by `mutex`.
    private var queue: [@Sendable () -> Void] = []
    private var sleeping = false

    /// Wraps each burst of work (the daemon holds answer writes back until its end).
    private let aroundBurst: @Sendable (() -> Void) -> Void

    init(aroundBurst: @escaping @Sendable (() -> Void) -> Void = { $0() }) {
        self.aroundBurst = aroundBurst
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(condition, nil)
        NamedThread.start("fetchd-answers") { [self] in run() }
    }

    /// Runs `work` on the worker thread soon, after what was handed over before it.
    func execute(_ work: @escaping @Sendable () -> Void) {
        pthread_mutex_lock(mutex)
        queue.append(work)
        let wake = sleeping
        sleeping = false
        pthread_mutex_unlock(mutex)
        if wake { pthread_cond_signal(condition) }
    }

    private func run() {
        var batch: [@Sendable () -> Void] = []
        while true {
            pthread_mutex_lock(mutex)
            while queue.isEmpty {
                sleeping = true
                pthread_cond_wait(condition, mutex)
            }
            swap(&batch, &queue)
            pthread_mutex_unlock(mutex)
            aroundBurst { for work in batch { work() } }
            batch.removeAll(keepingCapacity: true)
        }
    }
}
