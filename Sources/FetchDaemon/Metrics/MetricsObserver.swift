import FetchEngine

/// Counts each attempt that reached the network into the metrics (`Metrics`): its duration
/// (from its hand-over to the engine, after the host's limits admitted it) by host and status
/// class, and the bytes it moved; and each retry. A stub's answer or a cache hit is not an
/// HTTP request (the stub store and the cache count theirs); an attempt that never started
/// is not either.
final class MetricsObserver: JobObserver {
    let metrics: Metrics
    let clock: JobClock

    init(metrics: Metrics, clock: JobClock) {
        self.metrics = metrics
        self.clock = clock
    }

    func attemptEnded(_ attempt: Attempt, _ outcome: AttemptOutcome, from source: AttemptSource?,
                      then decision: JobMachine.Decision, _ job: Job) {
        guard source == .network else { return }
        let status: Int?
        switch outcome {
        case .success(let response):
            status = response.status
            if response.sentBytes > 0 { metrics.count(.sentBytes, by: Int(response.sentBytes)) }
            if response.receivedBytes > 0 { metrics.count(.receivedBytes, by: Int(response.receivedBytes)) }
        case .failure(let failed as JobFailed) where failed.error.kind != .cancelled:
            status = nil
        case .failure:
            return
        }
        let slot = metrics.hosts.slot(for: job.host(of: attempt))
        metrics.observe(slot: slot, status: status, microseconds: max(0, Int((clock.now() - attempt.launchedAt) * 1e6)))
    }

    func retrying(_ job: Job, delay: Double, attempt: Int, reason: String) {
        metrics.count(.retries)
    }
}
