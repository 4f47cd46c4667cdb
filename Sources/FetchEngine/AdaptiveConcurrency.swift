/// How many requests a host with an `adaptive` limit may have running at once, learned from
/// its answers (AIMD, as TCP's congestion window): halved (at least 1) when the server says it
/// is overloaded (a 429, a 503, or a request that timed out), one more after each
/// `current` successes in a row, up to the limit's `maxConcurrent` (the `ceiling`).
///
/// One overload shows in the answers of every request that was in flight when it began: a
/// request that started before the last cut is part of the overload that cut was for, and
/// does not cut again (it still ends a run of successes). Pure: the time is an argument of
/// every call (seconds on the caller's monotonic clock), so tests move the clock by hand.
public struct AdaptiveConcurrency: Sendable, Equatable {
    /// The requests that may run at once now (`concurrencyNow`).
    public private(set) var current: Int
    /// Successes in a row since the last change.
    public private(set) var successes = 0
    /// When the concurrency was last halved.
    public private(set) var lastCut = -Double.infinity

    /// Starts at the ceiling: nothing has said the server is overloaded yet.
    public init(ceiling: Int) {
        current = max(1, ceiling)
    }

    /// An answer that says the server is overloaded, to a request that ran for `elapsed`
    /// seconds until `now`.
    public mutating func overloaded(elapsed: Double, now: Double, ceiling: Int) {
        successes = 0
        current = min(current, max(1, ceiling))
        guard now - max(0, elapsed) >= lastCut else { return }  // in flight at the last cut
        current = max(1, current / 2)
        lastCut = now
    }

    /// An answer that does not say so.
    public mutating func succeeded(ceiling: Int) {
        let ceiling = max(1, ceiling)
        guard current < ceiling else {
            current = ceiling
            successes = 0
            return
        }
        successes += 1
        if successes >= current {
            current += 1
            successes = 0
        }
    }

    /// Back at the ceiling: nothing left to remember.
    public func isAtCeiling(_ ceiling: Int) -> Bool { current >= ceiling }
}
