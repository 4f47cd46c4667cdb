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
