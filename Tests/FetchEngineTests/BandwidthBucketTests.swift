import XCTest

@testable import FetchEngine

/// A moved-by-hand monotonic clock (nanoseconds).
private final class TestClock: Sendable {
    private let nanos = Locked<UInt64>(1_000_000_000)
    var now: UInt64 { nanos.withLock { $0 } }
    func advance(_ by: UInt64) { nanos.withLock { $0 += by } }
    var read: @Sendable () -> UInt64 { { self.now } }
}

/// The bandwidth caps' bucket and the throttle that pauses a transfer on it, with a clock
/// moved by hand: the rate holds over every window, a burst is the most that goes at once,
/// a piece larger than the burst is paid off before the next, and several transfers drawing
/// from one bucket share its rate.
final class BandwidthBucketTests: XCTestCase {
    /// Receives `total` bytes in pieces of `piece` as the write callback would, sleeping as
    /// long as the bucket asks; the (time, bytes so far) of each piece taken.
    private func receive(_ total: Int, piece: Int, bucket: inout TokenBucket, from start: UInt64) -> [(UInt64, Int)] {
        var now = start
        var got = 0
        var points: [(UInt64, Int)] = [(start, 0)]
        while got < total {
            let n = min(piece, total - got)
            let wait = bucket.delay(for: n, now: now)
            if wait > 0 {
                now += wait
                continue
            }
            bucket.take(n, now: now)
            got += n
            points.append((now, got))
        }
        return points
    }

    /// The most bytes taken within any window of `window` nanoseconds.
    private func mostInWindow(_ points: [(UInt64, Int)], window: UInt64 = 1_000_000_000) -> Int {
        var best = 0
        for i in points.indices {
            // Bytes of pieces taken at or after point i's time, up to `window` later.
            let before = i == 0 ? 0 : points[i - 1].1
            let end = points.lastIndex { $0.0 <= points[i].0 + window } ?? i
            best = max(best, points[end].1 - before)
        }
        return best
    }

    func testRateHoldsOverEverySecond() {
        let rate = 200_000
        var bucket = TokenBucket(rate: rate, burst: TokenBucket.defaultBurst(rate: rate), now: 0)
        XCTAssertEqual(bucket.burst, 20_000, "a tenth of a second's worth")
        let points = receive(600_000, piece: 16 << 10, bucket: &bucket, from: 0)
        let took = Double(points.last!.0) / 1e9
        XCTAssertEqual(took, 2.9, accuracy: 0.05, "a burst at once, then the rate: (600,000 - 20,000) / 200,000 s")
        XCTAssertLessThanOrEqual(mostInWindow(points), rate + bucket.burst, "no second carries more than the rate and one burst")
    }

    func testStartsFullAndRefillsNoMoreThanABurst() {
        var bucket = TokenBucket(rate: 1000, burst: 1000, now: 0)
        XCTAssertEqual(bucket.delay(for: 1000, now: 0), 0, "one burst may go at once")
        bucket.take(1000, now: 0)
        XCTAssertEqual(bucket.delay(for: 500, now: 0), 500_000_000, "then 500 bytes wait half a second at 1000 B/s")
        XCTAssertEqual(bucket.available(now: 3_600_000_000_000), 1000, "an hour idle still leaves one burst")
    }

    func testPieceLargerThanTheBurstIsPaidOffBeforeTheNext() {
        var bucket = TokenBucket(rate: 1000, burst: 100, now: 0)
        XCTAssertEqual(bucket.delay(for: 1000, now: 0), 0, "a full burst lets a larger piece through")
        bucket.take(1000, now: 0)
        XCTAssertEqual(bucket.balance, -900)
        XCTAssertEqual(bucket.delay(for: 10, now: 0), 910_000_000, "the debt and the next piece")
        XCTAssertEqual(bucket.delay(for: 10, now: 910_000_000), 0)
    }

    func testSharedBucketHoldsTheRateForAllItsTransfers() {
        let clock = TestClock()
        let shared = BandwidthBucket(bytesPerSecond: 100_000, clock: clock.read)
        let a = TransferThrottle(id: 1, receive: [shared], send: [])
        let b = TransferThrottle(id: 2, receive: [shared], send: [])
        let start = clock.now
        var got = 0
        // Two transfers take turns with 4 KiB pieces for 3 s.
        while clock.now - start < 3_000_000_000 {
            var moved = false
            for t in [a, b] where t.mayReceive(4096) {
                t.received(4096)
                got += 4096
                moved = true
            }
            if !moved { clock.advance(1_000_000) }
        }
        XCTAssertLessThanOrEqual(got, 3 * 100_000 + shared.burst + 2 * 4096, "both together, not each, held to the rate")
        XCTAssertGreaterThanOrEqual(got, 3 * 100_000 - 2 * 4096)
    }

    func testThrottleRecordsWhenToUnpause() {
        let clock = TestClock()
        let timers = ThrottleTimers(clock: clock.read)
        let cap = BandwidthBucket(bytesPerSecond: 10_000, burst: 1000, clock: clock.read)
        let throttle = TransferThrottle(id: 9, receive: [cap], send: [cap])
        throttle.timers = timers
        XCTAssertTrue(throttle.mayReceive(1000))
        throttle.received(1000)
        XCTAssertFalse(throttle.mayReceive(1000), "the burst is spent")
        XCTAssertEqual(timers.millisecondsUntilNext(), 100, "1000 bytes at 10,000 B/s")
        XCTAssertEqual(timers.takeDue(), [], "not yet")
        clock.advance(99_999_999)
        XCTAssertEqual(timers.millisecondsUntilNext(), 1, "rounded up: the loop never wakes before it is due")
        clock.advance(1)
        XCTAssertEqual(timers.takeDue(), [9])
        XCTAssertNil(timers.millisecondsUntilNext(), "taken: not listed any more")
        XCTAssertTrue(throttle.mayReceive(1000))
    }

    func testSendReadsNoMoreThanTheBucketHolds() {
        let clock = TestClock()
        let timers = ThrottleTimers(clock: clock.read)
        let throttle = TransferThrottle(id: 3, receive: [], send: [BandwidthBucket(bytesPerSecond: 10_000, burst: 1000, clock: clock.read)])
        throttle.timers = timers
        var asked: [Int] = []
        XCTAssertEqual(throttle.read(64 << 10, remaining: 5000) { asked.append($0); return $0 }, 1000, "one burst of the 64 KiB asked")
        XCTAssertEqual(throttle.read(64 << 10, remaining: 4000) { asked.append($0); return $0 }, Int(CURL_READFUNC_PAUSE_VALUE),
                       "nothing left: paused")
        XCTAssertEqual(asked, [1000], "the file is not read while paused")
        XCTAssertEqual(timers.millisecondsUntilNext(), 100)
        XCTAssertEqual(throttle.read(64 << 10, remaining: 0) { _ in XCTFail("no read at the end"); return 0 }, 0,
                       "the end of the body is the end, not a pause")
        clock.advance(50_000_000)
        XCTAssertEqual(throttle.sendable(400), 400, "a small read goes once the bucket holds it")
    }

    func testTimersKeepTheEarliestAndForgetEndedTransfers() {
        let clock = TestClock()
        let timers = ThrottleTimers(clock: clock.read)
        timers.resume(1, after: 5_000_000)
        timers.resume(1, after: 9_000_000)
        timers.resume(2, after: 7_000_000)
        XCTAssertEqual(timers.millisecondsUntilNext(), 5)
        timers.remove(1)
        XCTAssertEqual(timers.millisecondsUntilNext(), 7)
        clock.advance(7_000_000)
        XCTAssertEqual(timers.takeDue(), [2])
        XCTAssertTrue(timers.isEmpty)
    }
}

/// libcurl's CURL_READFUNC_PAUSE, as the throttle returns it.
private let CURL_READFUNC_PAUSE_VALUE = 0x1000_0001
