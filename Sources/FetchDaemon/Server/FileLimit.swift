import Glibc

/// The open-file limit: each connection, transfer, part file and HAR file holds a
/// descriptor, and the default soft limit (often 1024) is far below what the hard limit
/// allows a daemon. Raised once at start.
enum FileLimit {
    struct Raised: Equatable {
        let from: UInt64
        let to: UInt64
    }

    /// Raises the soft limit to the hard limit; says what it was and what it is.
    static func raiseSoftToHard() -> Raised? {
        var limit = rlimit()
        guard getrlimit(resource, &limit) == 0 else { return nil }
        let before = UInt64(limit.rlim_cur)
        if limit.rlim_cur < limit.rlim_max {
            limit.rlim_cur = limit.rlim_max
            if setrlimit(resource, &limit) != 0 { return Raised(from: before, to: before) }
        }
        return Raised(from: before, to: current ?? before)
    }

    /// The soft limit now.
    static var current: UInt64? {
        var limit = rlimit()
        guard getrlimit(resource, &limit) == 0 else { return nil }
        return UInt64(limit.rlim_cur)
    }

    private static var resource: __rlimit_resource_t { __rlimit_resource_t(RLIMIT_NOFILE.rawValue) }
}

/// Says when a repeated failure is worth a log line: the first time, then at most once per
/// `interval`, with how many went unsaid in between. Pure: the caller passes the time.
struct LogThrottle<Instant: InstantProtocol>: Sendable where Instant.Duration == Duration {
    let interval: Duration
    private var lastLogged: Instant?
    private var unlogged = 0

    init(interval: Duration) { self.interval = interval }

    /// nil: stay quiet; a number: log now, saying that many more happened since the last line.
    mutating func shouldLog(at now: Instant) -> Int? {
        if let lastLogged, lastLogged.duration(to: now) < interval {
            unlogged += 1
            return nil
        }
        defer { unlogged = 0 }
        lastLogged = now
        return unlogged
    }
}
