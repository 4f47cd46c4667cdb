import Dispatch
import FetchEngine
import Synchronization

/// The daemon's own counters, for `getMetrics` and `--metrics-listen` (operations.md,
/// "Metrics"). Counting is a relaxed atomic addition in memory allocated once: no lock, no
/// allocation, and a request's host is found in `HostSlots` without a lock. What is a level
/// rather than a count (active requests, the queue, open connections) is read when the
/// metrics are asked for, from where it is kept already.
final class Metrics: @unchecked Sendable {
    // @unchecked: the pointers are allocated once and never freed (one Metrics per daemon);
    // everything behind them is an Atomic.

    /// Plain counters, one atomic each.
    enum Counter: Int, CaseIterable {
        /// Attempts started again after a failure or a retryable status.
        case retries
        /// Hosts paused by a 429 or 503 with Retry-After.
        case retryAfterPauses
        /// Attempts that waited in their host's queue, and how long in all (µs).
        case limitWaits, limitWaitMicroseconds
        /// Bytes of request and response bodies moved by finished transfers.
        case sentBytes, receivedBytes
        /// Credentials fetched for auth rules (a file read, a token request, a helper run), and those that failed.
        case authFetches, authFailures
        /// jobEvent notifications not sent to a subscriber that did not read them (operations.md).
        case jobEventsDropped
    }

    /// http_client_request_duration_seconds' bucket bounds: OpenTelemetry's recommended
    /// boundaries for HTTP durations, in seconds.
    static let bucketBounds: [Double] = [0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10]
    /// The same in microseconds, compared on each observation.
    private static let boundMicroseconds: [Int] = bucketBounds.map { Int(($0 * 1e6).rounded()) }
    /// Status classes: 1xx to 5xx by the status' first digit, then transfers with no answer.
    static let statusClasses = ["1xx", "2xx", "3xx", "4xx", "5xx", "error"]
    static let errorClass = 5
    /// Per host and class: one count per bucket (the last for +Inf), then the sum in µs.
    private static let cellsPerSeries = bucketBounds.count + 2

    let hosts = HostSlots()
    private let counters: UnsafeMutablePointer<Atomic<Int>>
    private let histogram: UnsafeMutablePointer<Atomic<Int>>
    private static let seriesCount = (HostSlots.capacity + 1) * statusClasses.count

    init() {
        counters = .allocate(capacity: Counter.allCases.count)
        for index in 0..<Counter.allCases.count { (counters + index).initialize(to: Atomic(0)) }
        let cells = Self.seriesCount * Self.cellsPerSeries
        histogram = .allocate(capacity: cells)
        for index in 0..<cells { (histogram + index).initialize(to: Atomic(0)) }
    }

    func count(_ counter: Counter, by amount: Int = 1) {
        counters[counter.rawValue].add(amount, ordering: .relaxed)
    }

    func value(_ counter: Counter) -> Int {
        counters[counter.rawValue].load(ordering: .relaxed)
    }

    /// One attempt's duration, by its host's slot and its status (nil: no answer).
    func observe(slot: Int, status: Int?, microseconds: Int) {
        var statusClass = Self.errorClass
        if let status, (100..<600).contains(status) { statusClass = status / 100 - 1 }
        let base = (slot * Self.statusClasses.count + statusClass) * Self.cellsPerSeries
        var bucket = 0
        let bounds = Self.boundMicroseconds
        while bucket < bounds.count && microseconds > bounds[bucket] { bucket += 1 }
        histogram[base + bucket].add(1, ordering: .relaxed)
        histogram[base + Self.cellsPerSeries - 1].add(microseconds, ordering: .relaxed)
    }

    /// One series of the duration histogram: per-bucket counts (not cumulative; the last is
    /// +Inf) and the sum in µs. Nil when it has never counted.
    struct Series {
        let slot: Int
        let statusClass: String
        let buckets: [Int]
        let sumMicroseconds: Int
        var count: Int { buckets.reduce(0, +) }
    }

    /// Every series that has counted, by slot then class.
    func durationSeries() -> [Series] {
        var series: [Series] = []
        let slots = hosts.count
        for slot in Array(0..<slots) + [HostSlots.capacity] {
            for statusClass in 0..<Self.statusClasses.count {
                let base = (slot * Self.statusClasses.count + statusClass) * Self.cellsPerSeries
                let buckets = (0..<(Self.bucketBounds.count + 1)).map { histogram[base + $0].load(ordering: .relaxed) }
                guard buckets.contains(where: { $0 != 0 }) else { continue }
                series.append(Series(slot: slot, statusClass: Self.statusClasses[statusClass], buckets: buckets,
                                     sumMicroseconds: histogram[base + Self.cellsPerSeries - 1].load(ordering: .relaxed)))
            }
        }
        return series
    }

    /// Monotonic microseconds, for durations (vDSO clock_gettime: no system call).
    static var nowMicroseconds: Int { Int(DispatchTime.now().uptimeNanoseconds / 1000) }
}
