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

/// Hosts the duration histogram has a series for: the first `capacity` hosts seen each get a
/// slot for good; the rest share slot `capacity` (`other`). A lookup is a hash and a probe of
/// a fixed table whose entries are published once and never change, so it takes no lock; only
/// a new host takes one (at most `capacity` times, and a host past it none at all).
final class HostSlots: @unchecked Sendable {
    // @unchecked: `entries` is allocated once; each entry is written once (under `adding`)
    // with release ordering and read with acquire ordering; entries are never freed.
    static let capacity = 100
    private static let tableSize = 256

    private final class Entry {
        let host: HostKey
        let slot: Int
        init(host: HostKey, slot: Int) {
            self.host = host
            self.slot = slot
        }
    }

    private let entries: UnsafeMutablePointer<Atomic<UnsafeRawPointer?>>
    private let full = Atomic<Bool>(false)
    private let adding = Locked<[HostKey]>([])

    init() {
        entries = .allocate(capacity: Self.tableSize)
        for index in 0..<Self.tableSize { (entries + index).initialize(to: Atomic(nil)) }
    }

    /// The host's slot, or `capacity` for `other`.
    func slot(for host: HostKey) -> Int {
        var index = host.hashValue & (Self.tableSize - 1)
        while let raw = entries[index].load(ordering: .acquiring) {
            let found = Unmanaged<Entry>.fromOpaque(raw)._withUnsafeGuaranteedRef { $0.host == host ? $0.slot : nil }
            if let found { return found }
            index = (index + 1) & (Self.tableSize - 1)
        }
        if full.load(ordering: .relaxed) { return Self.capacity }
        return add(host)
    }

    private func add(_ host: HostKey) -> Int {
        adding.withLock { hosts in
            if let known = hosts.firstIndex(of: host) { return known }
            guard hosts.count < Self.capacity else { return Self.capacity }
            let slot = hosts.count
            hosts.append(host)
            if hosts.count == Self.capacity { full.store(true, ordering: .relaxed) }
            var index = host.hashValue & (Self.tableSize - 1)
            while entries[index].load(ordering: .relaxed) != nil { index = (index + 1) & (Self.tableSize - 1) }
            let entry = UnsafeRawPointer(Unmanaged.passRetained(Entry(host: host, slot: slot)).toOpaque())
            entries[index].store(entry, ordering: .releasing)
            return slot
        }
    }

    /// The hosts with a slot, by slot.
    var all: [HostKey] { adding.withLock { $0 } }
    var count: Int { adding.withLock { $0.count } }
}
