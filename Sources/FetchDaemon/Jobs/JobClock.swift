import Dispatch
import FoundationEssentials

/// The clocks a job's stages and observers read, injected through `JobServices`: the daemon
/// passes the real ones, unit tests a clock they move by hand.
struct JobClock: Sendable {
    /// Seconds on a monotonic clock: waits, deadlines, durations. The daemon's is the host
    /// scheduler's (`HostAdmission.now`), which the job machine also reads.
    let now: @Sendable () -> Double
    /// The wall clock: HTTP dates (Retry-After, a rate limit's reset), HTTP log times.
    let wall: @Sendable () -> Date

    /// The system's clocks (monotonic seconds since boot, and the wall clock).
    static let system = JobClock(now: { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 }, wall: { Date() })
}
