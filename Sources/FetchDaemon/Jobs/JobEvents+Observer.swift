/// The `jobEvent`s a job's life sends to subscribers (queued, started, retrying, and how it
/// ended).
extension JobEvents: JobObserver {
    func jobQueued(_ job: Job) throws {
        publish(job, .queued)
    }

    func attemptStarted(_ attempt: Attempt, _ job: Job) {
        publish(job, .started)
    }

    func retrying(_ job: Job, delay: Double, attempt: Int, reason: String) {
        publish(job, .retrying)
    }

    func jobEnded(_ job: Job, _ ending: JobEnding) {
        switch ending {
        case .finished(let status, _): publish(job, .finished, status: status)
        case .failed: publish(job, .failed)
        case .cancelled: publish(job, .cancelled)
        }
    }
}
