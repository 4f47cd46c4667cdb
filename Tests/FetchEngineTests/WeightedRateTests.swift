import FetchEngine
import XCTest

/// `cost`: the GCRA with a weight, with a moved clock. A request of cost c conforms once the
/// bucket holds c, and takes c intervals of the rate.
final class WeightedRateTests: XCTestCase {
    let host = HostKey(scheme: "https", name: "llm.example", port: 443)

    /// Admits each request as soon as it may start (each finishes at once); the start times.
    private func starts(_ scheduler: inout HostScheduler, costs: [Double]) throws -> [Double] {
        for (index, cost) in costs.enumerated() {
            try scheduler.enqueue(.init(id: UInt64(index), host: host, priority: 0, cost: cost))
        }
        var now = 0.0
        var times = [Double](repeating: -1, count: costs.count)
        var started = 0
        while started < costs.count {
            for ticket in scheduler.admit(now: now) {
                times[Int(ticket.id)] = now
                started += 1
                scheduler.finished(host: host)
            }
            guard let next = scheduler.nextWakeup(now: now) else { break }
            now = max(now, next)
        }
        return times
    }

    private func limit(rps: Double, burst: Int) -> HostScheduler.Limit {
        .init(maxConcurrent: nil, requestsPerSecond: rps, burst: burst)
    }

    func testACostTakesThatManyIntervals() throws {
        // 10 units a second, a bucket of 10: two requests of 5 at once, then one every 0.5 s.
        var s = HostScheduler(defaultLimit: limit(rps: 10, burst: 10))
        let times = try starts(&s, costs: [5, 5, 5, 5, 5])
        for (time, want) in zip(times, [0, 0, 0.5, 1.0, 1.5]) { XCTAssertEqual(time, want, accuracy: 1e-9) }
    }

    func testCostOneIsTheUnweightedRate() throws {
        var weighted = HostScheduler(defaultLimit: limit(rps: 5, burst: 2))
        let times = try starts(&weighted, costs: [1, 1, 1, 1])
        for (time, want) in zip(times, [0, 0, 0.2, 0.4]) { XCTAssertEqual(time, want, accuracy: 1e-9) }
    }

    func testMixedCostsKeepTheWindowBoundInUnits() throws {
        let costs: [Double] = (0..<60).map { [1, 3, 0.5, 7, 2][$0 % 5] }
        var s = HostScheduler(defaultLimit: limit(rps: 20, burst: 8))
        let times = try starts(&s, costs: costs)
        XCTAssertFalse(times.contains(-1))
        for window in [0.25, 0.5, 1.0, 2.0] {
            for start in times {
                let units = zip(times, costs).filter { $0.0 >= start && $0.0 < start + window }.map(\.1).reduce(0, +)
                XCTAssertLessThanOrEqual(units, 8 + 20 * window + 1e-9, "window \(window) from \(start)")
            }
        }
        let total = costs.reduce(0, +)
        XCTAssertEqual(times.max()!, (total - costs.last! - 8 + costs.last!) / 20, accuracy: 0.5,
                       "the whole rate: the units after the first burst take units / rps")
    }

    func testACostAboveTheBurstWaitsForAFullBucketNotForever() throws {
        // The daemon refuses such a cost when a request comes; a burst lowered later must not
        // strand one that was accepted: it takes the whole bucket.
        var s = HostScheduler(defaultLimit: limit(rps: 10, burst: 4))
        let times = try starts(&s, costs: [9, 9, 1])
        // Each takes the whole bucket of 4; the last one, a single unit, one interval after.
        for (time, want) in zip(times, [0, 0.4, 0.5]) { XCTAssertEqual(time, want, accuracy: 1e-9) }
    }

    func testNoRateNoWeight() throws {
        var s = HostScheduler(defaultLimit: .init(maxConcurrent: nil))
        XCTAssertEqual(try starts(&s, costs: [50, 50, 50]), [0, 0, 0])
    }

    func testStartNowWeighsToo() {
        var s = HostScheduler(defaultLimit: limit(rps: 10, burst: 10))
        XCTAssertTrue(s.startNow(.init(id: 1, host: host, priority: 0, cost: 6), now: 0))
        XCTAssertFalse(s.startNow(.init(id: 2, host: host, priority: 0, cost: 6), now: 0), "4 units left")
        XCTAssertTrue(s.startNow(.init(id: 2, host: host, priority: 0, cost: 4), now: 0))
        XCTAssertFalse(s.startNow(.init(id: 3, host: host, priority: 0, cost: 1), now: 0.05))
        XCTAssertTrue(s.startNow(.init(id: 3, host: host, priority: 0, cost: 1), now: 0.1))
    }
}
