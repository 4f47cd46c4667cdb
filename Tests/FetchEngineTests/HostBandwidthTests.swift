import FetchEngine
import XCTest

/// Bandwidth budgets per host and for the daemon (`maxRecvBytesPerSecond` on a limit): which
/// buckets a transfer draws from, and how they follow the limits. The buckets' arithmetic is
/// BandwidthBucketTests'; here a moved clock checks retuning.
final class HostBandwidthTests: XCTestCase {
    let api = HostKey(scheme: "https", name: "api.example", port: 443)
    let apiOtherPort = HostKey(scheme: "https", name: "api.example", port: 8443)
    let cdn = HostKey(scheme: "https", name: "cdn.example", port: 443)

    private func limit(_ budget: Int?) -> HostScheduler.Limit {
        var limit = HostScheduler.Limit()
        limit.maxRecvBytesPerSecond = budget
        return limit
    }

    func testNoBudgetNoBuckets() {
        let admission = HostAdmission(scheduler: HostScheduler())
        XCTAssertEqual(admission.receiveBudgets(for: api), [])
    }

    func testAHostsBudgetIsOneBucketPerHostKey() {
        let admission = HostAdmission(scheduler: HostScheduler())
        admission.setLimit(limit(300_000), for: "api.example")
        let first = admission.receiveBudgets(for: api)
        XCTAssertEqual(first.count, 1)
        XCTAssertEqual(first[0].rate, 300_000)
        XCTAssertTrue(admission.receiveBudgets(for: api)[0] === first[0], "every transfer to the host shares it")
        XCTAssertFalse(admission.receiveBudgets(for: apiOtherPort)[0] === first[0], "each host key has its own, as for rates")
        XCTAssertEqual(admission.receiveBudgets(for: cdn), [], "a host under * alone has none")
    }

    func testTheStarBudgetIsTheWholeDaemons() {
        let admission = HostAdmission(scheduler: HostScheduler(defaultLimit: limit(1_000_000)))
        let a = admission.receiveBudgets(for: api), c = admission.receiveBudgets(for: cdn)
        XCTAssertEqual(a.count, 1)
        XCTAssertTrue(a[0] === c[0], "one bucket for every host")
        admission.setLimit(limit(200_000), for: "api.example")
        let both = admission.receiveBudgets(for: api)
        XCTAssertEqual(both.map(\.rate), [200_000, 1_000_000], "its host's, then the daemon's")
        XCTAssertTrue(both[1] === c[0])
    }

    func testChangesRetuneTheBucketsTransfersHold() {
        let admission = HostAdmission(scheduler: HostScheduler())
        admission.setLimit(limit(100_000), for: "api.example")
        let held = admission.receiveBudgets(for: api)[0]
        admission.setLimit(limit(400_000), for: "api.example")
        XCTAssertEqual(held.rate, 400_000, "a running transfer follows the new budget")
        XCTAssertTrue(admission.receiveBudgets(for: api)[0] === held)
        admission.setLimit(limit(nil), for: "api.example")
        XCTAssertEqual(held.delay(for: 1 << 30), 0, "lifted: no limit for the transfers that hold it")
        XCTAssertEqual(admission.receiveBudgets(for: api), [])
        admission.setLimit(limit(50_000), for: "api.example")
        XCTAssertFalse(admission.receiveBudgets(for: api)[0] === held, "a new budget, a new bucket")
        admission.removeLimit(for: "api.example")
        XCTAssertEqual(admission.receiveBudgets(for: api), [])
    }

    func testANewEntryDoesNotCopyTheDaemonsBudget() {
        XCTAssertNil(limit(5000).asNewEntry.maxRecvBytesPerSecond)
        XCTAssertEqual(limit(5000).asNewEntry.maxConcurrent, 10, "the rest is copied")
    }

    func testRetuneKeepsWhatTheBucketHoldsUpToTheNewBurst() {
        final class Clock: @unchecked Sendable { var now: UInt64 = 0 }
        let clock = Clock()
        let bucket = BandwidthBucket(bytesPerSecond: 100_000, clock: { clock.now })
        XCTAssertEqual(bucket.available(), 10_000, "a tenth of a second's worth")
        bucket.take(10_000)
        bucket.retune(bytesPerSecond: 1_000_000)
        XCTAssertEqual(bucket.burst, 100_000)
        clock.now = 10_000_000  // 10 ms: 10,000 bytes at the new rate
        XCTAssertEqual(bucket.available(), 10_000)
        bucket.retune(bytesPerSecond: 10_000)
        XCTAssertEqual(bucket.available(), 1024, "at most the new burst")
        bucket.retune(bytesPerSecond: nil)
        XCTAssertEqual(bucket.delay(for: 1 << 20), 0)
        bucket.retune(bytesPerSecond: 5)
        XCTAssertEqual(bucket.delay(for: 1 << 20), 0, "lifted stays lifted")
    }
}
