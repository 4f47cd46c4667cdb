@testable import FetchDaemon
import FetchEngine
import Foundation
import Glibc
import JSONRPC
import XCTest

/// Every observer told a job's events by hand, as `JobDriver` tells them: a fake job and
/// attempt, a clock moved by hand.
final class ObserverTests: XCTestCase {
    let clock = ManualClock()

    // MARK: MetricsObserver

    func testAnAttemptOnTheNetworkIsCountedWithItsDuration() throws {
        let metrics = Metrics()
        let observer = MetricsObserver(metrics: metrics, clock: clock.clock)
        let job = try Fake.job(clock: clock)
        let attempt = Fake.attempt(job)
        attempt.launchedAt = clock.now
        clock.advance(0.003)
        observer.attemptEnded(attempt, Fake.answered(200), from: .network, then: .final, job)
        let series = metrics.durationSeries()
        XCTAssertEqual(series.reduce(0) { $0 + $1.count }, 1)
        XCTAssertEqual(metrics.value(.sentBytes), 10)
        // Not the network's: a stub's answer, a cache hit, an attempt that never started.
        observer.attemptEnded(attempt, Fake.answered(200), from: .substitute, then: .final, job)
        observer.attemptEnded(attempt, Fake.answered(200), from: .stage, then: .final, job)
        observer.attemptEnded(attempt, .failure(NotAllowed(detail: "x")), from: nil, then: .final, job)
        XCTAssertEqual(metrics.durationSeries().reduce(0) { $0 + $1.count }, 1)
        observer.retrying(job, delay: 1, attempt: 2, reason: "status 503")
        XCTAssertEqual(metrics.value(.retries), 1)
    }

    // MARK: JobEvents

    func testSubscribersHearEachEventOfTheJob() throws {
        let events = JobEvents(clients: ClientDirectory(), metrics: Metrics())
        let heard = Locked<[JSONValue]>([])
        events.subscribe(RPCContext(connectionID: 99) { method, params in
            if method == "jobEvent" { heard.withLock { $0.append(params) } }
        }, budget: nil)
        let job = try Fake.job(clock: clock)
        try events.jobQueued(job)
        events.attemptStarted(Fake.attempt(job), job)
        events.retrying(job, delay: 0, attempt: 2, reason: "x")
        events.jobEnded(job, .finished(status: 201, landed: nil))
        let got = heard.withLock { $0 }
        XCTAssertEqual(got.map { $0["event"]?.stringValue }, ["queued", "started", "retrying", "finished"])
        XCTAssertEqual(got.last?["status"]?.integerValue, 201)
        XCTAssertEqual(got.first?["jobId"]?.stringValue, job.id)
        events.jobEnded(job, .cancelled(.cancel))
        events.jobEnded(job, .failed(NotAllowed(detail: "x")))
        XCTAssertEqual(heard.withLock { $0 }.suffix(2).map { $0["event"]?.stringValue }, ["cancelled", "failed"])
    }

    // MARK: HTTPLog

    func testWhileLoggingEachAttemptIsRecordedAndTheJobWritesItsHARFile() throws {
        let dir = Fake.temporaryDirectory(self)
        let log = HTTPLog(defaultDirectory: dir, log: Logger(minimum: .error))
        let job = try Fake.job(clock: clock)
        let quiet = Fake.attempt(job)
        log.attemptStarted(quiet, job)
        XCTAssertFalse(quiet.request.recordsExchange, "logging is off: no hops asked for")
        try log.apply(HTTPLog.Settings(enabled: true, directory: dir))
        let attempt = Fake.attempt(job)
        attempt.secrets = ["s3cret"]
        log.attemptStarted(attempt, job)
        XCTAssertTrue(attempt.request.recordsExchange)
        attempt.launchedAt = clock.now
        clock.advance(2)
        log.attemptEnded(attempt, Fake.answered(200), from: .network, then: .final, job)
        let record = try XCTUnwrap(job.attemptRecords.first)
        XCTAssertEqual(record.ruleSecrets, ["s3cret"])
        XCTAssertEqual(record.startedAt.timeIntervalSince1970, clock.wall.timeIntervalSince1970 - 2, accuracy: 0.001,
                       "when it was handed over")
        // An answer a stage made without the network is kept as the exchange it stands for.
        let hit = Fake.attempt(job, number: 2)
        log.attemptEnded(hit, Fake.answered(200), from: .stage, then: .final, job)
        XCTAssertEqual(job.attemptRecords.count, 2)
        XCTAssertEqual(try job.attemptRecords[1].outcome.get().exchange.map(\.status), [200])
        // An attempt that never started is not an exchange.
        log.attemptEnded(Fake.attempt(job, number: 3), .failure(NotAllowed(detail: "x")), from: nil, then: .final, job)
        XCTAssertEqual(job.attemptRecords.count, 2)
        log.jobEnded(job, .finished(status: 200, landed: nil))
        log.flush()
        let files = try FileManager.default.contentsOfDirectory(atPath: dir).filter { $0.hasSuffix(".har") }
        XCTAssertEqual(files.count, 1)
        XCTAssertTrue(files[0].hasSuffix("-\(job.id).har"), files[0])
    }

    // MARK: DurableJournal

    private func record(_ id: String) -> DurableStore.Record {
        DurableStore.Record(jobID: id, method: "download", params: ["url": "http://h.test/x", "jobId": .string(id)], restarts: 0)
    }

    func testADurableJobIsWrittenDownItsBudgetKeptAndItsRowRemovedAtTheEnd() throws {
        let store = DurableStore(directory: Fake.temporaryDirectory(self), log: Logger(minimum: .error))
        let blocking = WorkerThreads(name: "test-blocking", count: 1)
        let journal = DurableJournal(store: store, blocking: blocking, onEngineThread: { false })
        let job = try Fake.job(kind: .download, clock: clock, durableRecord: record("d1"), id: "d1")
        try journal.jobQueued(job)
        XCTAssertEqual(store.unfinished().map(\.jobID), ["d1"])

        // A failed attempt another follows: the budget is written down (on the blocking threads).
        job.withRetry { $0.failures = 1 }
        journal.attemptEnded(Fake.attempt(job), Fake.answered(503), from: .network, then: .again(delay: 1, reason: "x"), job)
        drain(blocking)
        XCTAssertEqual(store.unfinished().first?.retry.failures, 1)
        // The same count again, or a final outcome, writes nothing more.
        job.withRetry { $0.failures = 2 }
        journal.attemptEnded(Fake.attempt(job), Fake.answered(503), from: .network, then: .final, job)
        drain(blocking)
        XCTAssertEqual(store.unfinished().first?.retry.failures, 1)

        // Stopped by the daemon's shutdown: kept for the next daemon.
        journal.jobEnded(job, .cancelled(.shutdown))
        XCTAssertEqual(store.unfinished().map(\.jobID), ["d1"])
        journal.jobEnded(job, .finished(status: 200, landed: nil))
        XCTAssertEqual(store.unfinished().map(\.jobID), [])
    }

    func testWithoutAStateDirectoryADurableJobIsRefusedAndOthersPass() throws {
        let journal = DurableJournal(store: nil, blocking: WorkerThreads(name: "test-blocking", count: 1), onEngineThread: { false })
        let durable = try Fake.job(kind: .download, clock: clock, durableRecord: record("d2"), id: "d2")
        XCTAssertThrowsError(try journal.jobQueued(durable)) { error in XCTAssertTrue(error is NotAllowed, "\(error)") }
        XCTAssertNoThrow(try journal.jobQueued(try Fake.job(clock: clock)))
    }

    func testOnAnEngineThreadTheRowIsRemovedOnTheBlockingThreads() throws {
        let store = DurableStore(directory: Fake.temporaryDirectory(self), log: Logger(minimum: .error))
        let blocking = WorkerThreads(name: "test-blocking", count: 1)
        let journal = DurableJournal(store: store, blocking: blocking, onEngineThread: { true })
        let job = try Fake.job(kind: .download, clock: clock, durableRecord: record("d3"), id: "d3")
        try journal.jobQueued(job)
        let held = expectation(description: "the blocking thread is busy")
        let resume = DispatchSemaphore(value: 0)
        blocking.execute {
            held.fulfill()
            resume.wait()
        }
        wait(for: [held], timeout: 10)
        journal.jobEnded(job, .failed(NotAllowed(detail: "x")))
        XCTAssertEqual(store.unfinished().map(\.jobID), ["d3"], "not removed on the calling thread")
        resume.signal()
        drain(blocking)
        XCTAssertEqual(store.unfinished().map(\.jobID), [])
    }

    /// Waits until what `threads` was given so far has run (one thread: in order).
    private func drain(_ threads: WorkerThreads) {
        let done = expectation(description: "drained")
        threads.execute { done.fulfill() }
        wait(for: [done], timeout: 10)
    }
}
