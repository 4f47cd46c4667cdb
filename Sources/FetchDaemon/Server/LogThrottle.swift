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
