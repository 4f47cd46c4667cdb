import FetchEngine

/// Counts each attempt that reaches the network into the metrics (Metrics): its duration
/// by host and status class, and the bytes it moved. Last of the common stages, so the
/// duration starts after the host's limits admitted it. A stub's answer is not an HTTP
/// request (the stub store counts it); an attempt abandoned before its transfer is not either.
final class MetricsStage: Stage {
    let metrics: Metrics

    init(metrics: Metrics) {
        self.metrics = metrics
    }

    func prepare(_ attempt: Attempt, _ job: Job) throws -> Preparation {
        job.pipeline.attemptStartMicroseconds = Metrics.nowMicroseconds
        return .proceed
    }

    func ended(_ attempt: Attempt, _ outcome: AttemptOutcome, _ job: Job) {
        guard attempt.substitute == nil else { return }
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
        let slot = metrics.hosts.slot(for: HostLimitStage.host(attempt, job))
        metrics.observe(slot: slot, status: status,
                        microseconds: max(0, Metrics.nowMicroseconds - job.pipeline.attemptStartMicroseconds))
    }
}
