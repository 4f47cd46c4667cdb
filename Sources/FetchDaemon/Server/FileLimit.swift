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
