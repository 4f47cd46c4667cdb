import FetchEngine
import FoundationEssentials

/// The limits the server sets, as its answers tell them: with `followServer` (the default),
/// an answer whose rate limit headers say the host's budget is spent pauses the host for
/// every client (every daemon, when the limit is shared) until the server's reset, whatever
/// its status and whether or not this job tries again (`HostGate.followServer`). Listed just
/// after `HostLimitStage`, so it hears how the attempt ended before the host's slot is given
/// back: no request of another client starts between the answer and the pause.
final class ServerLimitStage: Stage {
    private let gate: HostGate
    let log: Logger

    init(gate: HostGate, log: Logger) {
        self.gate = gate
        self.log = log
    }

    func ended(_ attempt: Attempt, _ outcome: AttemptOutcome, _ job: Job) {
        // A stub's answer is not the server's.
        guard attempt.substitute == nil, let headers = outcome.successHeaders else { return }
        let host = HostLimitStage.host(attempt, job)
        if let pause = gate.followServer(headers, host: host, sharedHost: false) {
            log.info("pausing \(host) for \(pause) s: the server's rate limit headers say its budget is spent")
        }
    }
}

extension Result where Success == HTTPResponse {
    /// The answer's headers, read without binding (copying) the whole response.
    var successHeaders: ResponseHeaders? {
        if case .success(let response) = self { return response.headers }
        return nil
    }
}
