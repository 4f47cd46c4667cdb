import FetchEngine
import XCTest

final class HostSchedulerTests: XCTestCase {
    let a = HostKey(scheme: "http", name: "a.example", port: 80)
    let b = HostKey(scheme: "http", name: "b.example", port: 8080)

    private func ticket(_ id: UInt64, _ host: HostKey, priority: Int = 0) -> HostScheduler.Ticket {
        .init(id: id, host: host, priority: priority)
    }

    /// Admits and finishes each request at once, moving the clock to each wakeup, and
    /// returns the time each one started.
    private func startTimes(_ scheduler: inout HostScheduler, count: Int, host: HostKey) throws -> [Double] {
        for id in 0..<count { try scheduler.enqueue(ticket(UInt64(id), host)) }
        var now = 0.0
        var times: [Double] = []
        while times.count < count {
            for started in scheduler.admit(now: now) {
                times.append(now)
                scheduler.finished(host: started.host)
            }
            guard let next = scheduler.nextWakeup(now: now) else { break }
            now = max(now, next)
        }
        return times
    }

    func testRateWithoutBurstSpacesStartsExactly() throws {
        var scheduler = HostScheduler(defaultLimit: .init(maxConcurrent: nil, requestsPerSecond: 5, burst: 1))
        let times = try startTimes(&scheduler, count: 6, host: a)
        XCTAssertEqual(times.count, 6)
        for (index, time) in times.enumerated() { XCTAssertEqual(time, Double(index) * 0.2, accuracy: 1e-9) }
    }

    func testBurstStartsAtOnceThenTheRate() throws {
        var scheduler = HostScheduler(defaultLimit: .init(maxConcurrent: nil, requestsPerSecond: 2, burst: 3))
        let times = try startTimes(&scheduler, count: 6, host: a)
        let expected = [0, 0, 0, 0.5, 1.0, 1.5]
        for (time, want) in zip(times, expected) { XCTAssertEqual(time, want, accuracy: 1e-9) }
    }

    func testNoWindowEverExceedsBurstPlusRateTimesLength() throws {
        var scheduler = HostScheduler(defaultLimit: .init(maxConcurrent: nil, requestsPerSecond: 5, burst: 2))
        let times = try startTimes(&scheduler, count: 40, host: a)
        for window in [0.1, 0.5, 1.0, 2.0] {
            for start in times {
                let inWindow = times.filter { $0 >= start && $0 < start + window }.count
                XCTAssertLessThanOrEqual(Double(inWindow), 2 + 5 * window + 1e-9, "window \(window) from \(start)")
            }
        }
        XCTAssertEqual(times[1], 0, accuracy: 1e-9, "the burst of 2 starts at once")
        XCTAssertEqual(times.last!, 38 * 0.2, accuracy: 1e-9, "then one every 0.2 s")
    }

    // MARK: a timer that fires late

    /// Drives the scheduler as `HostAdmission` does (expire, admit, then sleep until
    /// `nextWakeup`), with a timer that fires a random 0...`maxLate` s after the time asked
    /// for. Each admitted request finishes at once. Returns the time each one started.
    private func lateStarts(_ scheduler: inout HostScheduler, count: Int, firstID: UInt64 = 0, from start: Double,
                            maxLate: Double, random: inout SplitMix64) throws -> [Double] {
        for id in 0..<UInt64(count) { try scheduler.enqueue(ticket(firstID + id, a)) }
        var now = start
        var times: [Double] = []
        while times.count < count {
            scheduler.expire(now: now)
            for started in scheduler.admit(now: now) {
                times.append(now)
                scheduler.finished(host: started.host)
            }
            guard let next = scheduler.nextWakeup(now: now) else { break }
            now = max(now, next) + Double.random(in: 0...maxLate, using: &random)
        }
        return times
    }

    /// The most starts in any closed window [t, t + length].
    private func mostIn(_ length: Double, _ times: [Double]) -> Int {
        var most = 0, low = 0
        for (high, time) in times.enumerated() {
            while time - times[low] > length + 1e-12 { low += 1 }
            most = max(most, high - low + 1)
        }
        return most
    }

    /// At most burst + rps x (T + slack) starts in any window of length T.
    private func assertWindowBound(_ times: [Double], _ limit: HostScheduler.Limit, _ message: String,
                                   file: StaticString = #filePath, line: UInt = #line) {
        for length in [0.0, 0.002, 0.01, 0.05, 0.1, 0.5, 1.0] {
            let bound = Double(limit.burst) + limit.requestsPerSecond! * (length + limit.slack)
            XCTAssertLessThanOrEqual(Double(mostIn(length, times)), bound + 1e-6, "\(message), window \(length)",
                                     file: file, line: line)
        }
    }

    func testLateTimerStillDeliversTheWholeRate() throws {
        for seed in UInt64(1)...5 {
            var random = SplitMix64(seed: seed)
            var scheduler = HostScheduler(defaultLimit: .init(maxConcurrent: nil, requestsPerSecond: 200, burst: 1))
            let times = try lateStarts(&scheduler, count: 400, from: 0, maxLate: 0.001, random: &random)
            XCTAssertEqual(times.count, 400)
            // 399 intervals of 5 ms after the first start: 1.995 s, plus the last wake-up's lateness.
            XCTAssertLessThanOrEqual(times.last! - times.first!, 2.0 + 1.0 / 200, "seed \(seed)")
            XCTAssertLessThanOrEqual(mostIn(1.0, times), 1 + 200, "seed \(seed)")
        }
    }

    func testLateTimerNeverBreaksTheWindowBound() throws {
        // Burst 1 and 4; 200/s (slack 2 ms, more than the lateness) and 2,000/s (slack 0.25 ms,
        // less than the lateness, which then costs rate but must never buy extra starts).
        for (rps, burst) in [(200.0, 1), (200, 4), (2000, 1), (2000, 4)] {
            var random = SplitMix64(seed: UInt64(rps) + UInt64(burst))
            let limit = HostScheduler.Limit(maxConcurrent: nil, requestsPerSecond: rps, burst: burst)
            var scheduler = HostScheduler(defaultLimit: limit)
            let times = try lateStarts(&scheduler, count: Int(2 * rps), from: 0, maxLate: 0.001, random: &random)
            assertWindowBound(times, limit, "\(rps)/s burst \(burst)")
            XCTAssertLessThanOrEqual(mostIn(1.0, times), burst + Int(rps), "\(rps)/s burst \(burst)")
        }
    }

    func testAfterAnIdleGapOnlyTheBurstStartsAtOnce() throws {
        for burst in [1, 3] {
            var random = SplitMix64(seed: UInt64(burst))
            let limit = HostScheduler.Limit(maxConcurrent: nil, requestsPerSecond: 200, burst: burst)
            var scheduler = HostScheduler(defaultLimit: limit)
            let busy = try lateStarts(&scheduler, count: 400, from: 0, maxLate: 0.001, random: &random)
            let resume = busy.last! + 5
            let after = try lateStarts(&scheduler, count: 20, firstID: 1000, from: resume, maxLate: 0.001, random: &random)
            XCTAssertEqual(after.filter { $0 == resume }.count, burst, "burst \(burst): the burst starts at once, no more")
            XCTAssertGreaterThanOrEqual(after[burst] - resume, 1.0 / 200 - 1e-9, "burst \(burst): then the rate")
            assertWindowBound(after, limit, "burst \(burst), after the gap")
            XCTAssertLessThanOrEqual(mostIn(1.0, busy + after), burst + 200)
        }
    }

    func testStartCountsFromItsDueTimeWithinTheSlack() throws {
        var scheduler = HostScheduler(defaultLimit: .init(maxConcurrent: nil, requestsPerSecond: 200, burst: 1))
        XCTAssertEqual(scheduler.limit(for: a).slack, 0.002, accuracy: 1e-12, "half of 5 ms, capped at 2 ms")
        XCTAssertEqual(HostScheduler.Limit(requestsPerSecond: 2000).slack, 0.00025, accuracy: 1e-12)
        XCTAssertEqual(HostScheduler.Limit(requestsPerSecond: nil).slack, 0)
        for id in 0..<4 { try scheduler.enqueue(ticket(UInt64(id), a)) }
        XCTAssertEqual(scheduler.admit(now: 0).count, 1)
        XCTAssertEqual(scheduler.hosts[a]!.theoreticalArrival, 0.005, accuracy: 1e-12, "an idle host: from now")
        XCTAssertEqual(scheduler.admit(now: 0.0051).count, 1, "0.1 ms late")
        XCTAssertEqual(scheduler.hosts[a]!.theoreticalArrival, 0.010, accuracy: 1e-12, "from its due time, 0.005")
        scheduler.expire(now: 0.0115)  // 1.5 ms past tat: still remembered
        XCTAssertEqual(scheduler.admit(now: 0.0115).count, 1)
        XCTAssertEqual(scheduler.hosts[a]!.theoreticalArrival, 0.015, accuracy: 1e-12, "1.5 ms late: from its due time")
        XCTAssertEqual(scheduler.admit(now: 0.0180).count, 1, "3 ms late: more than the slack")
        XCTAssertEqual(scheduler.hosts[a]!.theoreticalArrival, 0.023, accuracy: 1e-12, "from now, as after an idle gap")
    }

    func testConcurrencyCap() throws {
        var scheduler = HostScheduler(defaultLimit: .init(maxConcurrent: 2))
        for id in 0..<5 { try scheduler.enqueue(ticket(UInt64(id), a)) }
        XCTAssertEqual(scheduler.admit(now: 0).map(\.id), [0, 1])
        XCTAssertEqual(scheduler.admit(now: 10), [], "capped until one finishes")
        XCTAssertNil(scheduler.nextWakeup(now: 10), "no timer: only a finish frees a slot")
        scheduler.finished(host: a)
        XCTAssertEqual(scheduler.admit(now: 10).map(\.id), [2])
        XCTAssertEqual(scheduler.hosts[a]?.running, 2)
    }

    func testHostsAreIndependentAndKeyedByPort() throws {
        var scheduler = HostScheduler(defaultLimit: .init(maxConcurrent: 1))
        let otherPort = HostKey(scheme: "http", name: "a.example", port: 81)
        try scheduler.enqueue(ticket(1, a))
        try scheduler.enqueue(ticket(2, a))
        try scheduler.enqueue(ticket(3, otherPort))
        try scheduler.enqueue(ticket(4, b))
        XCTAssertEqual(Set(scheduler.admit(now: 0).map(\.id)), [1, 3, 4])
    }

    func testPriorityFirstThenFIFO() throws {
        var scheduler = HostScheduler(defaultLimit: .init(maxConcurrent: 1))
        try scheduler.enqueue(ticket(1, a))  // starts at once below
        XCTAssertEqual(scheduler.admit(now: 0).map(\.id), [1])
        try scheduler.enqueue(ticket(2, a, priority: 0))
        try scheduler.enqueue(ticket(3, a, priority: 5))
        try scheduler.enqueue(ticket(4, a, priority: 0))
        try scheduler.enqueue(ticket(5, a, priority: 5))
        try scheduler.enqueue(ticket(6, a, priority: -1))
        var order: [UInt64] = []
        for _ in 0..<5 {
            scheduler.finished(host: a)
            order += scheduler.admit(now: 0).map(\.id)
        }
        XCTAssertEqual(order, [3, 5, 2, 4, 6])
    }

    func testPauseHoldsStartsUntilItEnds() throws {
        var scheduler = HostScheduler(defaultLimit: .init(maxConcurrent: nil))
        scheduler.pause(host: a, until: 7)
        try scheduler.enqueue(ticket(1, a))
        try scheduler.enqueue(ticket(2, b))
        XCTAssertEqual(scheduler.admit(now: 0).map(\.id), [2], "only the paused host waits")
        XCTAssertEqual(scheduler.nextWakeup(now: 0), 7)
        XCTAssertEqual(scheduler.admit(now: 6.9), [])
        XCTAssertEqual(scheduler.admit(now: 7).map(\.id), [1])
    }

    func testMostSpecificLimitWins() {
        var scheduler = HostScheduler()
        scheduler.setLimit(.init(maxConcurrent: 3), for: "a.example")
        scheduler.setLimit(.init(maxConcurrent: 1), for: "a.example:8080")
        XCTAssertEqual(scheduler.limit(for: a).maxConcurrent, 3)
        XCTAssertEqual(scheduler.limit(for: HostKey(scheme: "http", name: "a.example", port: 8080)).maxConcurrent, 1)
        XCTAssertEqual(scheduler.limit(for: b).maxConcurrent, 10, "the * default")
        XCTAssertEqual(scheduler.limitEntry(for: b), "*")
    }

    func testTheDefaultAloneFollowsEveryChangeOfTheLimits() {
        // With only `*` the limit is read without a lookup by name: that shortcut must end
        // when a host gets its own entry, come back when the entry goes, and follow `*`.
        var scheduler = HostScheduler(defaultLimit: .init(maxConcurrent: 2))
        XCTAssertEqual(scheduler.limit(for: a).maxConcurrent, 2)
        scheduler.setLimit(.init(maxConcurrent: 5), for: "*")
        XCTAssertEqual(scheduler.limit(for: a).maxConcurrent, 5)
        scheduler.setLimit(.init(maxConcurrent: 1), for: "A.example")
        XCTAssertEqual(scheduler.limit(for: a).maxConcurrent, 1)
        XCTAssertEqual(scheduler.limit(for: b).maxConcurrent, 5)
        scheduler.removeLimit(for: "a.example")
        XCTAssertEqual(scheduler.limit(for: a).maxConcurrent, 5)
        XCTAssertTrue(scheduler.startNow(ticket(1, a), now: 0))
        scheduler.setLimit(.init(maxConcurrent: 1), for: "*")
        XCTAssertFalse(scheduler.startNow(ticket(2, a), now: 0), "one running, the new * allows one")
        XCTAssertTrue(scheduler.startNow(ticket(3, b), now: 0))
        scheduler.finished(host: a)
        XCTAssertTrue(scheduler.startNow(ticket(4, a), now: 0))
    }

    func testEqualHostKeysHashAlike() {
        let x = HostKey(scheme: "HTTP", name: "A.Example", port: 80)
        let y = HostKey(scheme: "http", name: "a.example", port: 80)
        XCTAssertEqual(x, y)
        XCTAssertEqual(x.hashValue, y.hashValue)
        XCTAssertEqual(Set([x, y, HostKey(scheme: "http", name: "a.example", port: 81)]).count, 2)
    }

    func testQueueBoundRefusesNewButKeepsQueued() throws {
        var scheduler = HostScheduler(defaultLimit: .init(maxConcurrent: 0), maxQueued: 3)
        for id in 0..<3 { try scheduler.enqueue(ticket(UInt64(id), a)) }
        XCTAssertThrowsError(try scheduler.enqueue(ticket(9, a))) { XCTAssertEqual(($0 as? HostScheduler.Overloaded)?.limit, 3) }
        XCTAssertEqual(scheduler.queued, 3)
        XCTAssertTrue(scheduler.cancel(ticketID: 1, host: a))
        XCTAssertNoThrow(try scheduler.enqueue(ticket(10, a)))
    }

    func testRaisingALimitLetsWaitingRequestsStart() throws {
        var scheduler = HostScheduler(defaultLimit: .init(maxConcurrent: 1))
        for id in 0..<3 { try scheduler.enqueue(ticket(UInt64(id), a)) }
        XCTAssertEqual(scheduler.admit(now: 0).count, 1)
        scheduler.setLimit(.init(maxConcurrent: 3), for: "*")
        XCTAssertEqual(scheduler.admit(now: 0).count, 2)
    }
}

/// A small seeded generator, so the simulated lateness is the same on every run.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
