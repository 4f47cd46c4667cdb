import Glibc

/// A token bucket of bytes: `rate` bytes a second flow in, at most `burst` wait unspent.
/// Pure: every call is given the time (nanoseconds on any monotonic clock), so tests move the
/// clock by hand.
///
/// A piece of a response body cannot be taken in part (libcurl hands the write callback a
/// piece and keeps all of it when paused), so `delay(for:)` lets a piece through once the
/// bucket holds the piece or a whole burst, whichever is less, and `take` may leave the
/// balance below zero: the next piece then waits until the debt is paid. A request body can
/// be read in part: at most what the bucket holds (`available`) is read. Either way the
/// bytes in any window of T seconds stay within `burst + rate × T` (plus, for a piece larger
/// than the burst, that piece's excess).
public struct TokenBucket: Sendable, Equatable {
    public private(set) var rate: Int
    public private(set) var burst: Int
    /// Bytes that may go now; below zero while a piece larger than what was there is paid off.
    public private(set) var balance: Double
    private var updatedAt: UInt64

    /// Starts full (one burst may go at once).
    public init(rate: Int, burst: Int, now: UInt64) {
        precondition(rate > 0 && burst > 0, "a bucket needs a rate and a burst")
        self.rate = rate
        self.burst = burst
        balance = Double(burst)
        updatedAt = now
    }

    /// The burst for a cap of `rate` bytes a second: a tenth of a second's worth, so no
    /// second carries much more than the cap and a paused transfer wakes about ten times a
    /// second; at least 1 KiB (or the whole rate, when that is less), so a slow cap does not
    /// wake for every few bytes.
    public static func defaultBurst(rate: Int) -> Int {
        max(min(rate, 1024), rate / 10)
    }

    private mutating func refill(_ now: UInt64) {
        guard now > updatedAt else { return }
        balance = min(Double(burst), balance + Double(now - updatedAt) * Double(rate) / 1e9)
        updatedAt = now
    }

    /// Nanoseconds until a piece of `bytes` may go: 0 when it may go now (then `take` it).
    public mutating func delay(for bytes: Int, now: UInt64) -> UInt64 {
        refill(now)
        let needed = Double(min(max(bytes, 1), burst))
        guard balance < needed else { return 0 }
        return UInt64(((needed - balance) * 1e9 / Double(rate)).rounded(.up))
    }

    /// `bytes` went (the balance may go below zero).
    public mutating func take(_ bytes: Int, now: UInt64) {
        refill(now)
        balance -= Double(bytes)
    }

    /// The bytes that may go now (never below zero).
    public mutating func available(now: UInt64) -> Int {
        refill(now)
        return max(0, Int(balance))
    }

    /// A new rate and burst from now on; what the bucket holds stays, at most the new burst.
    public mutating func retune(rate: Int, burst: Int, now: UInt64) {
        precondition(rate > 0 && burst > 0, "a bucket needs a rate and a burst")
        refill(now)
        self.rate = rate
        self.burst = burst
        balance = min(balance, Double(burst))
    }
}

/// A `TokenBucket` behind a lock, read with its own clock: one transfer's cap, or (shared by
/// several transfers, on any engine thread) a budget that all of them draw from. A shared
/// budget can be retuned while transfers draw from it, or lifted (`retune(bytesPerSecond:
/// nil)`: no limit from then on, for the transfers that still hold it).
public final class BandwidthBucket: Sendable, Equatable {
    /// nil: lifted, no limit.
    private let bucket: Locked<TokenBucket?>
    private let clock: @Sendable () -> UInt64

    /// 0 once lifted.
    public var rate: Int { bucket.withLock { $0?.rate ?? 0 } }

    /// `clock`: nanoseconds, monotonic (the engine's own by default; tests pass theirs).
    public init(bytesPerSecond rate: Int, burst: Int? = nil,
                clock: @escaping @Sendable () -> UInt64 = BandwidthBucket.monotonicNanoseconds) {
        bucket = Locked(TokenBucket(rate: rate, burst: burst ?? TokenBucket.defaultBurst(rate: rate), now: clock()))
        self.clock = clock
    }

    /// Int.max once lifted.
    public var burst: Int { bucket.withLock { $0?.burst ?? Int.max } }

    /// Nanoseconds until a piece of `bytes` may go (0: now; then call `take`).
    public func delay(for bytes: Int) -> UInt64 {
        let now = clock()
        return bucket.withLock { $0?.delay(for: bytes, now: now) ?? 0 }
    }

    public func take(_ bytes: Int) {
        let now = clock()
        bucket.withLock { $0?.take(bytes, now: now) }
    }

    /// How many bytes the bucket holds now (never below zero).
    public func available() -> Int {
        let now = clock()
        return bucket.withLock { $0?.available(now: now) ?? Int.max }
    }

    /// A new rate (and its default burst) from now on for every transfer that draws from this
    /// bucket; nil lifts it. A lifted bucket stays lifted.
    public func retune(bytesPerSecond rate: Int?) {
        let now = clock()
        bucket.withLock { bucket in
            guard let rate else { bucket = nil; return }
            bucket?.retune(rate: rate, burst: TokenBucket.defaultBurst(rate: rate), now: now)
        }
    }

    /// The same bucket (transfers that draw from it share it).
    public static func == (a: BandwidthBucket, b: BandwidthBucket) -> Bool { a === b }

    public static func monotonicNanoseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
    }
}
