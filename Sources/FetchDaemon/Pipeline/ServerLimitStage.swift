import FetchEngine
import FoundationEssentials

/// The limits the server sets, as its answers tell them: with `followServer` (the default),
/// an answer whose rate limit headers say the host's budget is spent pauses the host for
/// every client (every daemon, when the limit is shared) until the server's reset, whatever
/// its status and whether or not this job tries again (`HostGate.followServer`); with
/// `adaptive`, a 429, a 503 or a timeout halves the host's concurrency and a run of other
/// answers raises it again (`AdaptiveConcurrency`). Listed just after `HostLimitStage`, so it
/// hears how the attempt ended before the host's slot is given back: no request of another
/// client starts between the answer and the pause or the lower concurrency.
final class ServerLimitStage: Stage {
    private let gate: HostGate
    let log: Logger

    init(gate: HostGate, log: Logger) {
        self.gate = gate
        self.log = log
    }

    func ended(_ attempt: Attempt, _ outcome: AttemptOutcome, _ job: Job) {
        // A stub's answer is not the server's.
        guard attempt.substitute == nil else { return }
        if gate.admission.hasAdaptiveLimits { adapt(attempt, outcome, job) }
        guard let headers = outcome.successHeaders else { return }
        let host = job.host(of: attempt)
        if let pause = gate.followServer(headers, host: host, sharedHost: false) {
            log.info("pausing \(host) for \(pause) s: the server's rate limit headers say its budget is spent")
        }
    }

    /// An answer is a success unless it is a 429 or a 503; a timeout says overloaded too; other
    /// failures (a refused connection, a cancel) say nothing of the server's load.
    private func adapt(_ attempt: Attempt, _ outcome: AttemptOutcome, _ job: Job) {
        let host = job.host(of: attempt)
        if let status = outcome.successStatus {
            gate.admission.adapt(host, overloaded: status == 429 || status == 503, elapsed: outcome.successSeconds)
        } else if case .failure(let failed as JobFailed) = outcome, failed.error.kind == .timeout {
            gate.admission.adapt(host, overloaded: true, elapsed: Double(attempt.request.timeoutMs) / 1000)
        }
    }
}

extension Result where Success == HTTPResponse {
    /// The answer's headers, read without binding (copying) the whole response.
    var successHeaders: ResponseHeaders? {
        if case .success(let response) = self { return response.headers }
        return nil
    }

    /// How long the answered transfer took, in seconds (0 for a failure).
    var successSeconds: Double {
        if case .success(let response) = self { return Double(response.timings.total) / 1e6 }
        return 0
    }
}
