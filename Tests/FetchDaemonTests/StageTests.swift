@testable import FetchDaemon
import FetchEngine
import Foundation
import Glibc
import JSONRPC
import XCTest

/// Every stage driven by hand, the way `JobDriver` drives it: a fake job and attempt, outcomes
/// made up, a clock moved by hand; no engine, no sleeping.
final class StageTests: XCTestCase {
    let clock = ManualClock()

    // MARK: the job's slots

    private final class Counter: PipelineMember {
        struct State: DefaultJobState { var count = 0 }
    }

    func testEachMemberHasItsOwnSlotMadeOnFirstChange() throws {
        let job = try Fake.job(clock: clock)
        let a = Counter(), b = Counter()
        XCTAssertFalse(job.hasState(of: a))
        XCTAssertEqual(job.state(of: a).count, 0, "the initial state, without a slot")
        XCTAssertFalse(job.hasState(of: a), "reading makes no slot")
        job.withState(of: a) { $0.count += 2 }
        job.withState(of: a) { $0.count += 1 }
        XCTAssertTrue(job.hasState(of: a))
        XCTAssertEqual(job.state(of: a).count, 3)
        XCTAssertEqual(job.state(of: b).count, 0, "another member's slot is its own")
        XCTAssertFalse(job.hasState(of: b))
        let other = try Fake.job(clock: clock, id: "job-2")
        XCTAssertEqual(other.state(of: a).count, 0, "another job's slot is its own")
    }

    func testTheReportIsWhatTheStagesTold() throws {
        let job = try Fake.job(clock: clock)
        XCTAssertEqual(job.report.queuedMs, 0)
        XCTAssertNil(job.report.stub)
        job.updateReport { $0.queuedMs = 12.5 }
        job.updateReport { $0.stub = "s-1" }
        XCTAssertEqual(job.report.queuedMs, 12.5)
        XCTAssertEqual(job.report.stub, "s-1")
    }

    // MARK: RedirectStage

    func testARedirectOfAnAttemptThatCarriesSecretsIsFollowedAsTheSameAttempt() throws {
        let stage = RedirectStage()
        let job = try Fake.job(["url": "http://a.test/start", "method": "POST", "body": "x"], stages: [stage], clock: clock)
        let first = Fake.attempt(job)
        XCTAssertTrue(try stage.prepare(first, job).isProceed)
        XCTAssertEqual(first.request.url, "http://a.test/start", "no hop yet")
        first.secrets = ["s3cret"]
        first.request.maxRedirects = 0
        let redirect = Fake.answered(302, [("Location", "http://b.test/next")], url: "http://a.test/start")
        XCTAssertEqual(stage.judge(first, redirect, job).name, "follow")

        // The next step goes to the hop: a 302 turns the POST into a GET without its body.
        let hop = Fake.attempt(job)
        XCTAssertTrue(try stage.prepare(hop, job).isProceed)
        XCTAssertEqual(hop.request.url, "http://b.test/next")
        XCTAssertEqual(hop.request.method, "GET")
        XCTAssertEqual(hop.request.body, .none)
        XCTAssertEqual(hop.request.maxRedirects, 0, "the daemon follows every redirect of the job now")
        XCTAssertEqual(hop.secrets, ["s3cret"], "the hop is logged with the secrets before it")

        // The final answer counts the hop in.
        var decision = JobMachine.Decision.final
        var outcome = Fake.answered(200, url: "http://b.test/next")
        stage.review(hop, &decision, &outcome, job)
        XCTAssertEqual(try outcome.get().redirects, 1)
    }

    func testARedirectLibcurlMayFollowIsNotTheDaemons() throws {
        let stage = RedirectStage()
        let job = try Fake.job(stages: [stage], clock: clock)
        let attempt = Fake.attempt(job)
        XCTAssertEqual(stage.judge(attempt, Fake.answered(302, [("Location", "/y")]), job).name, "pass")
        XCTAssertFalse(job.hasState(of: stage), "nothing kept for a job the daemon follows nothing of")
    }

    func testARetryStartsOverFromTheJobsOwnURL() throws {
        let stage = RedirectStage()
        let job = try Fake.job(stages: [stage], clock: clock)
        let attempt = Fake.attempt(job)
        attempt.secrets = ["s"]
        XCTAssertEqual(stage.judge(attempt, Fake.answered(307, [("Location", "http://c.test/")]), job).name, "follow")
        var decision = JobMachine.Decision.again(delay: 1, reason: "status 503")
        var outcome = Fake.answered(503)
        stage.review(attempt, &decision, &outcome, job)
        let retry = Fake.attempt(job, number: 2)
        XCTAssertTrue(try stage.prepare(retry, job).isProceed)
        XCTAssertEqual(retry.request.url, "http://h.test/x")
    }

    // MARK: CookieStage

    func testTheRequestsJarIsTheAttempts() throws {
        let stage = CookieStage()
        let job = try Fake.job(["url": "http://h.test/x", "cookieJar": "shop"], stages: [stage], clock: clock)
        let attempt = Fake.attempt(job)
        attempt.request.cookieJar = nil
        XCTAssertTrue(try stage.prepare(attempt, job).isProceed)
        XCTAssertEqual(attempt.request.cookieJar, "shop")
    }

    // MARK: StubStage

    private func stubStore() throws -> StubStore {
        let store = StubStore()
        let json = #"{"set": "s", "match": {"url": "http://h.test/x"}, "respond": {"status": 201, "body": "hi"}}"#
        _ = try store.add(StubParams(JSONCodec.decode(Array(json.utf8)), policy: FilePolicy(allowedDirectories: [])))
        return store
    }

    func testAStubAnswersWhereTheTransferWouldAndTellsTheReport() throws {
        let stage = StubStage(stubs: try stubStore(), timers: DispatchQueue(label: "test.stub-timers"), clock: clock.clock)
        let job = try Fake.job(["url": "http://h.test/x", "stubs": "s"], stages: [stage], clock: clock)
        let attempt = Fake.attempt(job)
        XCTAssertTrue(try stage.prepare(attempt, job).isProceed)
        let substitute = try XCTUnwrap(attempt.substitute, "the stub answers in the engine's place")
        XCTAssertNotNil(job.report.stub)
        let made = substitute.answer(attempt, job)
        XCTAssertEqual(try made.outcome.get().status, 201)
        XCTAssertEqual(try made.outcome.get().body, Array("hi".utf8))
    }

    func testAMissIsAStubMissAndAJobWithoutASetIsLeftAlone() throws {
        let stage = StubStage(stubs: try stubStore(), timers: DispatchQueue(label: "test.stub-timers"), clock: clock.clock)
        let miss = try Fake.job(["url": "http://h.test/other", "stubs": "s"], stages: [stage], clock: clock)
        let attempt = Fake.attempt(miss)
        XCTAssertTrue(try stage.prepare(attempt, miss).isProceed)
        guard case .failure(let error) = try XCTUnwrap(attempt.substitute).answer(attempt, miss).outcome else {
            return XCTFail("a miss is a failure")
        }
        XCTAssertEqual(error.kind, .stubMiss)
        let plain = try Fake.job(stages: [stage], clock: clock)
        let network = Fake.attempt(plain)
        XCTAssertTrue(try stage.prepare(network, plain).isProceed)
        XCTAssertNil(network.substitute)
        XCTAssertNil(plain.report.stub)
    }

    // MARK: CredentialStage

    func testARulesCredentialIsAddedAsSecretsAndKeepsLibcurlFromRedirecting() throws {
        let store = CredentialStore(now: clock.clock.now) { _, _, _ in XCTFail("a fixed credential is never fetched") }
        store.set(AuthRule(host: AuthHostPattern("h.test")!, kind: .bearer(token: .inline("t0ken"))))
        let stage = CredentialStage(store: store)
        let job = try Fake.job(stages: [stage], clock: clock)
        let attempt = Fake.attempt(job)
        XCTAssertTrue(try stage.prepare(attempt, job).isProceed)
        XCTAssertEqual(attempt.request.header(named: "Authorization"), "Bearer t0ken")
        XCTAssertEqual(attempt.secrets, ["Bearer t0ken", "t0ken"])
        XCTAssertEqual(attempt.request.maxRedirects, 0)
        XCTAssertEqual(attempt.secretHeaders.map { $0.name }, ["Authorization"])
        // A fixed credential is not renewed after a 401: that answer stands.
        XCTAssertEqual(stage.judge(attempt, Fake.answered(401), job).name, "pass")
        // Another host: no rule.
        let other = try Fake.job(["url": "http://other.test/"], stages: [stage], clock: clock)
        let plain = Fake.attempt(other)
        XCTAssertTrue(try stage.prepare(plain, other).isProceed)
        XCTAssertTrue(plain.secrets.isEmpty)
        XCTAssertNil(plain.request.header(named: "Authorization"))
    }

    func testRemovingSecretsTakesTheCredentialOut() throws {
        let job = try Fake.job(clock: clock)
        let attempt = Fake.attempt(job)
        attempt.request.headers.append(HTTPHeader("Authorization", "Bearer abc"))
        attempt.request.headers.append(HTTPHeader("Accept", "*/*"))
        attempt.secrets = ["Bearer abc"]
        attempt.removeSecrets()
        XCTAssertEqual(attempt.request.headers.map(\.name), ["Accept"])
        XCTAssertTrue(attempt.secrets.isEmpty)
    }

    // MARK: CacheStage (without a cache directory)

    func testWithoutACacheOnlyIfCachedIsA504AndTheRestGoesOn() throws {
        let stage = CacheStage(cache: nil)
        let job = try Fake.job(["url": "http://h.test/x", "cache": "only-if-cached"], stages: [stage], clock: clock)
        let attempt = Fake.attempt(job)
        XCTAssertEqual(try XCTUnwrap(stage.prepare(attempt, job).answer).get().status, 504)
        let plain = try Fake.job(stages: [stage], clock: clock)
        XCTAssertTrue(try stage.prepare(Fake.attempt(plain), plain).isProceed)
        stage.ended(Fake.attempt(plain), Fake.answered(200), plain)
        XCTAssertNil(plain.report.cache, "no cache: the answer has no `cache`")
        XCTAssertNil(stage.answerAfterHold(Fake.attempt(plain), plain))
    }

    func testTheCacheKeyLeavesOutWhatTheCacheMustNotAnswer() throws {
        let job = try Fake.job(clock: clock)
        XCTAssertNotNil(CacheStage.key(Fake.attempt(job), job, .default))
        let recorded = Fake.attempt(job)
        recorded.networkOnly = true
        XCTAssertNil(CacheStage.key(recorded, job, .default), "a recorded attempt goes to the network")
        let post = try Fake.job(["url": "http://h.test/x", "method": "POST"], clock: clock)
        XCTAssertNil(CacheStage.key(Fake.attempt(post), post, .default))
        // A rule's credential is part of the key.
        let withRule = Fake.attempt(job)
        withRule.request.headers.append(HTTPHeader("Authorization", "Bearer a"))
        withRule.secrets = ["Bearer a"]
        let other = Fake.attempt(job)
        other.request.headers.append(HTTPHeader("Authorization", "Bearer b"))
        other.secrets = ["Bearer b"]
        XCTAssertNotEqual(CacheStage.key(withRule, job, .default), CacheStage.key(other, job, .default))
    }

    // MARK: HostLimitStage

    private func admission(maxConcurrent: Int) -> HostAdmission {
        HostAdmission(scheduler: HostScheduler(defaultLimit: HostScheduler.Limit(maxConcurrent: maxConcurrent)))
    }

    func testAFullHostHoldsTheAttemptAndTheWaitIsTheAnswersQueueTime() throws {
        let metrics = Metrics()
        let stage = HostLimitStage(admission: admission(maxConcurrent: 1), shared: nil, log: Logger(minimum: .error),
                                   metrics: metrics, clock: clock.clock)
        let first = try Fake.job(stages: [stage], clock: clock, id: "a")
        let firstAttempt = Fake.attempt(first)
        XCTAssertTrue(try stage.prepare(firstAttempt, first).isProceed, "room: it starts at once")
        let second = try Fake.job(stages: [stage], clock: clock, id: "b")
        let secondAttempt = Fake.attempt(second)
        let hold = try XCTUnwrap(stage.prepare(secondAttempt, second).hold, "no room: it waits")
        let released = expectation(description: "released")
        hold.start { result in
            if case .success = result { released.fulfill() }
        }
        clock.advance(0.25)
        stage.ended(firstAttempt, Fake.answered(200), first)
        wait(for: [released], timeout: 10)
        XCTAssertEqual(second.report.queuedMs, 250)
        XCTAssertEqual(metrics.value(.limitWaits), 1)
        XCTAssertEqual(first.report.queuedMs, 0, "admitted at once")
        // The next attempt's wait is its own.
        stage.ended(secondAttempt, Fake.answered(200), second)
        XCTAssertTrue(try stage.prepare(Fake.attempt(second, number: 2), second).isProceed)
        XCTAssertEqual(second.report.queuedMs, 0)
    }

    func testA503WithRetryAfterPausesTheHost() throws {
        let metrics = Metrics()
        let admission = admission(maxConcurrent: 4)
        let stage = HostLimitStage(admission: admission, shared: nil, log: Logger(minimum: .error), metrics: metrics,
                                   clock: clock.clock)
        let job = try Fake.job(stages: [stage], clock: clock)
        let attempt = Fake.attempt(job)
        XCTAssertTrue(try stage.prepare(attempt, job).isProceed)
        stage.ended(attempt, Fake.answered(503, [("Retry-After", "30")]), job)
        XCTAssertEqual(metrics.value(.retryAfterPauses), 1)
        XCTAssertNotNil(admission.snapshot().scheduler.hosts[job.spec.host]?.pausedUntil)
        // A plain 503 pauses nothing.
        let other = try Fake.job(["url": "http://other.test/"], stages: [stage], clock: clock)
        let plain = Fake.attempt(other)
        XCTAssertTrue(try stage.prepare(plain, other).isProceed)
        stage.ended(plain, Fake.answered(503), other)
        XCTAssertEqual(metrics.value(.retryAfterPauses), 1)
    }

    // MARK: ServerLimitStage

    func testTheServersSpentBudgetPausesTheHost() throws {
        let admission = admission(maxConcurrent: 4)
        let stage = ServerLimitStage(gate: HostGate(admission: admission, shared: nil, clock: clock.clock),
                                     log: Logger(minimum: .error))
        let job = try Fake.job(stages: [stage], clock: clock)
        let attempt = Fake.attempt(job)
        XCTAssertTrue(admission.startNow(HostLimitStage.ticket(attempt, job)))
        stage.ended(attempt, Fake.answered(200, [("RateLimit-Remaining", "0"), ("RateLimit-Reset", "20")]), job)
        XCTAssertNotNil(admission.snapshot().scheduler.hosts[job.spec.host]?.pausedUntil)
        // A stub's answer is not the server's.
        let other = try Fake.job(["url": "http://other.test/"], stages: [stage], clock: clock)
        let stubbed = Fake.attempt(other)
        stubbed.substitute = Substitute { _, _ in Substitute.Made(outcome: .success(Fake.response(200))) }
        stage.ended(stubbed, Fake.answered(200, [("RateLimit-Remaining", "0"), ("RateLimit-Reset", "20")]), other)
        XCTAssertNil(admission.snapshot().scheduler.hosts[other.spec.host]?.pausedUntil)
    }

    // MARK: DeadlineStage

    func testEachAttemptGetsWhatIsLeftOfMaxTime() throws {
        let stage = DeadlineStage(clock: clock.clock)
        let job = try Fake.job(["url": "http://h.test/x", "maxTime": 2], stages: [stage], clock: clock)
        clock.advance(0.5)
        let attempt = Fake.attempt(job)
        XCTAssertTrue(try stage.prepare(attempt, job).isProceed)
        XCTAssertEqual(attempt.request.timeoutMs, 1500)
        XCTAssertLessThanOrEqual(attempt.request.connectTimeoutMs, 1500)
        clock.advance(1.6)
        let late = Fake.attempt(job, number: 2)
        let failed = try XCTUnwrap(stage.prepare(late, job).answer?.jobFailure, "past the deadline: the job ends")
        XCTAssertEqual(failed.error.kind, .timeout)
        XCTAssertEqual(failed.attempts, 1)
        XCTAssertEqual(failed.error.curlCode, 28)
    }

    func testAWaitPastTheDeadlineIsRefusedAndATimeoutAtItEndsTheJob() throws {
        let stage = DeadlineStage(clock: clock.clock)
        let job = try Fake.job(["url": "http://h.test/x", "maxTime": 2], stages: [stage], clock: clock)
        let attempt = Fake.attempt(job)
        var decision = JobMachine.Decision.again(delay: 1.0, reason: "status 503")
        var outcome = Fake.answered(503)
        stage.review(attempt, &decision, &outcome, job)
        XCTAssertEqual(decision, .again(delay: 1.0, reason: "status 503"), "the wait ends in time")
        clock.advance(1.5)
        stage.review(attempt, &decision, &outcome, job)
        XCTAssertEqual(decision, .final)
        XCTAssertEqual(outcome.jobFailure?.error.kind, .timeout)
        // A timeout failure at the deadline is the deadline's.
        clock.advance(0.49)
        XCTAssertEqual(stage.judge(attempt, Fake.failed(.timeout, job), job).failure?.error.curlCode, 28)
        XCTAssertEqual(stage.judge(attempt, Fake.failed(.connect, job), job).name, "pass")
        // Without maxTime nothing is cut.
        let free = try Fake.job(clock: clock)
        var again = JobMachine.Decision.again(delay: 1e6, reason: "x")
        stage.review(Fake.attempt(free), &again, &outcome, free)
        XCTAssertEqual(again, .again(delay: 1e6, reason: "x"))
    }

    // MARK: RetryStage

    func testAFailureWorthAnotherTryWaitsAndCountsInTheJobsBudget() throws {
        let stage = RetryStage(clock: clock.clock)
        let job = try Fake.job(["url": "http://h.test/x", "retry": ["maxAttempts": 2, "delay": 0.5]], stages: [stage], clock: clock)
        let attempt = Fake.attempt(job)
        guard case .again(let delay, let reason) = stage.judge(attempt, Fake.answered(503), job) else {
            return XCTFail("a 503 is retried")
        }
        XCTAssertEqual(delay, 0.5)
        XCTAssertTrue(reason.contains("503"), reason)
        XCTAssertEqual(job.retry.failures, 1)
        // The budget is spent: the answer stands.
        XCTAssertEqual(stage.judge(Fake.attempt(job, number: 2), Fake.answered(503), job).name, "pass")
        XCTAssertEqual(job.retry.failures, 2)
    }

    func testSuccessesAndLocalErrorsAreNotRetried() throws {
        let stage = RetryStage(clock: clock.clock)
        let job = try Fake.job(stages: [stage], clock: clock)
        XCTAssertEqual(stage.judge(Fake.attempt(job), Fake.answered(200), job).name, "pass")
        XCTAssertEqual(stage.judge(Fake.attempt(job), .failure(NotAllowed(detail: "no")), job).name, "final")
        XCTAssertEqual(job.retry.failures, 0)
        XCTAssertEqual(stage.judge(Fake.attempt(job), Fake.failed(.connect, job), job).name, "again")
    }

    func testAResumedJobGoesOnWithItsBudget() throws {
        var record = DurableStore.Record(jobID: "d", method: "download", params: ["url": "http://h.test/x"], restarts: 1)
        record.retry = DurableStore.Retry(attempts: 3, failures: 3, waited: 2, jitter: 0.5)
        record.started = clock.wall.timeIntervalSince1970 - 10
        let job = try Fake.job(kind: .download, clock: clock, durableRecord: record)
        XCTAssertEqual(job.retry.failures, 3)
        XCTAssertEqual(job.retry.priorElapsed, 10, accuracy: 0.001)
        XCTAssertEqual(job.attempts, 3)
    }

    // MARK: PartFileStage

    func testAnAttemptStreamsIntoThePartFileAndAFailedJobLeavesNoEmptyOne() throws {
        let dir = Fake.temporaryDirectory(self)
        let part = PartFile(finalPath: dir + "/file.bin")
        let stage = PartFileStage(part: part, resume: true, durable: false, errorBodyLimit: 100)
        let job = try Fake.job(kind: .download, stages: [stage], clock: clock)
        let attempt = Fake.attempt(job)
        XCTAssertTrue(try stage.prepare(attempt, job).isProceed)
        guard case .file(let target) = attempt.request.destination else { return XCTFail("the body goes to the part file") }
        XCTAssertEqual(target.partPath, dir + "/file.bin.part")
        XCTAssertEqual(target.resumeOffset, 0)
        XCTAssertEqual(stage.judge(attempt, Fake.answered(416), job).name, "pass", "nothing was resumed: the 416 stands")
        XCTAssertTrue(FileManager.default.createFile(atPath: part.path, contents: Data()))
        stage.jobEnded(job, .failed(NotAllowed(detail: "x")))
        XCTAssertFalse(FileManager.default.fileExists(atPath: part.path))
    }

    func testA416ToAResumedRangeStartsOverAndTheNextStepRemovesTheFile() throws {
        let dir = Fake.temporaryDirectory(self)
        let part = PartFile(finalPath: dir + "/file.bin")
        XCTAssertTrue(FileManager.default.createFile(atPath: part.path, contents: Data("held".utf8)))
        // The validator of the answer the bytes came from, as the download's writer keeps it.
        let setter = Process()
        setter.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        setter.arguments = ["python3", "-c", "import os, sys; os.setxattr(sys.argv[1], sys.argv[2], b'\"v1\"')", part.path,
                            DownloadTarget.validatorAttribute]
        try setter.run()
        setter.waitUntilExit()
        guard setter.terminationStatus == 0 else { throw XCTSkip("no user extended attributes in \(dir)") }
        let stage = PartFileStage(part: part, resume: true, durable: false, errorBodyLimit: 100)
        let job = try Fake.job(kind: .download, stages: [stage], clock: clock)
        let attempt = Fake.attempt(job)
        XCTAssertTrue(try stage.prepare(attempt, job).isProceed)
        XCTAssertEqual(attempt.request.header(named: "Range"), "bytes=4-")
        XCTAssertEqual(attempt.request.header(named: "If-Range"), "\"v1\"")
        XCTAssertEqual(stage.judge(attempt, Fake.answered(416), job).name, "next")
        XCTAssertTrue(FileManager.default.fileExists(atPath: part.path), "not removed where the transfer ended")
        let again = Fake.attempt(job, number: 2)
        XCTAssertTrue(try stage.prepare(again, job).isProceed)
        XCTAssertFalse(FileManager.default.fileExists(atPath: part.path))
        XCTAssertNil(again.request.header(named: "Range"), "from zero")
    }

    // MARK: ResumableUploadStage

    func testTheStartThenEachChunkIsAStepOfTheJob() throws {
        let dir = Fake.temporaryDirectory(self)
        let file = dir + "/up.bin"
        XCTAssertTrue(FileManager.default.createFile(atPath: file, contents: Data(repeating: 7, count: 10)))
        let engine = HTTPEngine(settings: EngineSettings(smallRequestThreads: 1))
        defer { engine.shutdown() }
        let stage = ResumableUploadStage(path: file, fileSize: 10, chunkSize: 4, contentType: "application/x-test",
                                         engine: engine, freshTransferID: { 99 })
        let job = try Fake.job(["url": "http://h.test/upload", "method": "POST"], kind: .upload, stages: [stage], clock: clock)
        let start = Fake.attempt(job)
        XCTAssertTrue(try stage.prepare(start, job).isProceed)
        XCTAssertEqual(start.request.header(named: "X-Goog-Upload-Command"), "start")
        XCTAssertEqual(stage.judge(start, Fake.answered(200, [("X-Goog-Upload-URL", "http://h.test/session/1")]), job).name,
                       "next")
        let chunk = Fake.attempt(job, number: 2)
        XCTAssertTrue(try stage.prepare(chunk, job).isProceed)
        XCTAssertEqual(chunk.request.url, "http://h.test/session/1")
        XCTAssertEqual(chunk.request.method, "PUT")
        XCTAssertEqual(chunk.request.body, .fileRange(path: file, offset: 0, length: 4))
        // A refused chunk asks where the server stands, and uses up the job's retry budget.
        XCTAssertEqual(stage.judge(chunk, Fake.answered(400), job).name, "next")
        XCTAssertEqual(job.retry.failures, 1)
    }
}
