import Dispatch
import FetchEngine

/// The one place that lists the stages a job's attempts pass through, in order (outermost
/// first; the transfer itself comes after the last). To add a concern to every request, write
/// one file with a `Stage` and add one line to `common`.
enum Pipeline {
    /// Every job's stages: cookies choose the jar, the host's limits admit the attempt (and
    /// honour Retry-After), the retry policy judges the outcome, a stub may answer in the
    /// network's place (after the limits, and judged by the retry policy).
    static func common(admission: HostAdmission, log: Logger, stubs: StubStore, timers: DispatchQueue) -> [any Stage] {
        [
            CookieStage(),
            HostLimitStage(admission: admission, log: log),
            RetryStage(),
            StubStage(stubs: stubs, timers: timers),
        ]
    }

    /// A kind's stages: the common ones (made once, in JobServices), then the kind's own,
    /// nearest the network (a download's part file, a resumable upload's session).
    static func stages(_ services: JobServices, adding own: [any Stage] = []) -> [any Stage] {
        services.commonStages + own
    }
}
