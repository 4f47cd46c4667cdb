import Dispatch
import FetchEngine
import FoundationEssentials
import JSONRPC
import Synchronization

/// Stubs (protocol.md, "Stubs"): a request that names a stub set (`stubs`, or every request
/// of a daemon started with `--stubs` / `--offline`) is answered by the set's first matching
/// stub instead of the network. The answer is a `Substitute`, made once every stage has
/// prepared the attempt, so everything else still applies: the host's limits (this stage
/// comes after HostLimitStage) and Retry-After pauses, the retry policy, a download's part
/// file, progress and HTTP logs. A miss fails with -32001 kind `stubMiss` (one attempt), or
/// goes to the network when the set says so. `delayMs` is a hold released by a timer: no
/// thread waits.
final class StubStage: Stage {
    struct State: DefaultJobState {
        /// Set when the job's stub set records it (recordStubs).
        var recording: StubRecording?
    }

    let stubs: StubStore
    let timers: DispatchQueue
    let clock: JobClock

    init(stubs: StubStore, timers: DispatchQueue, clock: JobClock = .system) {
        self.stubs = stubs
        self.timers = timers
        self.clock = clock
    }

    func prepare(_ attempt: Attempt, _ job: Job) throws -> Preparation {
        guard let set = job.spec.model.stubs ?? stubs.implicitSet else { return .proceed }
        // The answer's `stub` is the last attempt's stub.
        if job.report.stub != nil { job.updateReport { $0.stub = nil } }
        let recording = job.state(of: self).recording
        // A job being recorded goes to the network on every attempt (its retries too).
        if recording != nil {
            attempt.request.recordsExchange = true
            attempt.networkOnly = true
            return .proceed
        }
        let request = StubRequest(attempt.request)
        guard stubs.searchesAside(set: set, request) else {
            let delay = apply(stubs.decide(set: set, request), to: attempt, job, set: set)
            return delay > 0 ? .hold(Self.delay(milliseconds: delay, on: timers)) : .proceed
        }
        // A search that may take long (many URL patterns, a long URL) runs on the store's
        // matching thread while the attempt is held: the job is listed (waitingForHost) and a
        // cancel ends it at once.
        let pending = PendingRelease()
        return .hold(Hold(
            start: { [stubs, timers] release in
                pending.arm(release)
                stubs.decideAside(set: set, request, cancelled: { pending.isReleased }) { decision in
                    var delay = 0
                    // Applied while the release is still pending: a cancel waits for it, or came first.
                    guard pending.ifPending({ delay = self.apply(decision, to: attempt, job, set: set) }) else { return }
                    if delay > 0 {
                        timers.asyncAfter(deadline: .now() + .milliseconds(delay)) { pending.release(.success(())) }
                    } else {
                        pending.release(.success(()))
                    }
                }
            },
            cancel: { error in pending.release(.failure(error)) }))
    }

    /// Sets the attempt up as the set decided; returns how long its answer waits (ms).
    private func apply(_ decision: StubStore.Decision, to attempt: Attempt, _ job: Job, set: String) -> Int {
        switch decision {
        case .network:
            return 0
        case .record(_, let recording):
            job.withState(of: self) { $0.recording = recording }
            attempt.networkOnly = true
            // Its hops are kept, for the HAR file.
            attempt.request.recordsExchange = true
            return 0
        case .miss(let miss):
            attempt.substitute = Substitute { _, _ in Self.missed(miss) }
            return 0
        case .answer(var answer, let stubID):
            job.updateReport { $0.stub = stubID }
            var delay = answer.delayMs
            // A delay the request's timeout does not allow ends as a real one would.
            if delay > 0 && delay >= attempt.request.timeoutMs {
                delay = attempt.request.timeoutMs
                answer = .fault(.timeout)
            }
            attempt.substitute = Substitute { [answer, stubs, clock] attempt, job in
                let (made, last) = Self.following(answer, attempt.request, set: set, stubs: stubs, now: clock.wall())
                // A redirect the set answered: the stub that gave the last answer.
                if let last { job.updateReport { $0.stub = last } }
                return made
            }
            return delay
        }
    }

    /// recordStubs: what the network answered joins the set and the HAR file.
    func ended(_ attempt: Attempt, _ outcome: AttemptOutcome, _ job: Job) {
        guard attempt.networkOnly, attempt.substitute == nil, case .success(let response) = outcome,
              let recording = job.state(of: self).recording else { return }
        stubs.recorded(attempt.request, response, in: recording)
        recording.append(Job.AttemptRecord(number: attempt.number, startedAt: clock.wall(), request: attempt.request,
                                           outcome: .success(response)))
    }

    static func missed(_ miss: StubMiss) -> Substitute.Made {
        Substitute.Made(outcome: .failure(TransferError(.stubMiss, miss.detail)), failureData: ["nearest": miss.nearestJSON])
    }

    static let redirectStatuses: Set<Int> = [301, 302, 303, 307, 308]

    /// The stub's answer, its redirects followed through the same set as libcurl follows real
    /// ones (up to maxRedirects; 303, and 301 or 302 to a POST, continue as GET without a
    /// body); a hop that no stub answers fails with stubMiss. Each hop's Set-Cookie reaches
    /// the jar, as a real answer's does.
    /// Also the stubId of a redirect hop's stub that answered last (nil: no hop).
    static func following(_ first: StubAnswer, _ original: HTTPRequest, set: String, stubs: StubStore, now: Date = Date())
        -> (Substitute.Made, lastStub: String?) {
        var request = original
        var answer = first
        var hops: [ExchangeHop] = []
        var redirects = 0
        var last: String?
        while true {
            let made = outcome(answer, request)
            guard case .success(var response) = made else { return (Substitute.Made(outcome: made), last) }
            if let jar = request.cookieJar {
                let cookies = StubCookies.cookies(from: Array(response.headers), url: request.url, now: now)
                if !cookies.isEmpty { stubs.storeCookies(cookies, jar) }
            }
            hops += response.exchange
            guard original.maxRedirects > 0, redirectStatuses.contains(response.status),
                  let location = response.headers.last(named: "Location"),
                  let next = RequestURL.resolve(location, against: request.url) else {
                response.redirects = redirects
                response.exchange = hops
                return (Substitute.Made(outcome: .success(response)), last)
            }
            guard redirects < original.maxRedirects else {
                return (Substitute.Made(outcome: .failure(TransferError(.tooManyRedirects, "Maximum (\(original.maxRedirects)) redirects followed"))),
                        last)
            }
            redirects += 1
            let asGet = response.status == 303 ? !request.method.caseInsensitiveEquals("HEAD")
                : (response.status == 301 || response.status == 302) && request.method.caseInsensitiveEquals("POST")
            if asGet {
                request.method = "GET"
                request.body = .none
            }
            request.url = next
            // (Searched here, where the answer is made: after a search aside, that is the
            // matching thread.)
            switch stubs.decide(set: set, StubRequest(request)) {
            case .answer(let nextAnswer, let stubID):
                answer = nextAnswer
                last = stubID
            case .miss(let miss), .network(let miss), .record(let miss, _): return (missed(miss), last)
            }
        }
    }

    /// The answer as a transfer would have produced it.
    static func outcome(_ answer: StubAnswer, _ request: HTTPRequest) -> Result<HTTPResponse, TransferError> {
        let stubbed: StubResponse
        switch answer {
        case .fault(let fault): return .failure(fault.error)
        case .respond(let response): stubbed = response
        }
        let body = request.method.caseInsensitiveEquals("HEAD") ? [] : stubbed.body
        let sent: Int64 = if case .bytes(let bytes) = request.body { Int64(bytes.count) } else { 0 }
        var response = HTTPResponse(
            status: stubbed.status, headers: ResponseHeaders(stubbed.headers), url: request.url, body: [], redirects: 0,
            httpVersion: "stub", timings: TransferTimings(), sentBytes: sent, receivedBytes: Int64(body.count))
        if request.recordsExchange {
            // What HTTP logs show: the request as it would have gone, and the stub's answer.
            var hop = ExchangeHop(url: request.url, method: request.method)
            hop.requestHeaders = request.headers
            hop.httpVersion = "stub"
            hop.status = stubbed.status
            hop.responseHeaders = stubbed.headers
            response.exchange = [hop]
        }
        switch request.destination {
        case .memory:
            guard body.count <= request.maxBodyBytes else {
                return .failure(TransferError(.bodyTooLarge, "the body is larger than maxBodyBytes (\(request.maxBodyBytes))"))
            }
            response.body = body
        case .stream:
            // Delivered by the job's BodyDelivery before its answer (`deliverRest`), in pieces.
            response.body = body
        case .file(let target):
            switch KnownBody.write(body, status: stubbed.status, headers: ResponseHeaders(stubbed.headers), to: target) {
            case .success(let written):
                response.download = written.download
                response.body = written.errorBody
            case .failure(let error):
                return .failure(error)
            }
        }
        return .success(response)
    }

    /// Releases the attempt after the delay; a cancel releases it at once with its error.
    static func delay(milliseconds: Int, on queue: DispatchQueue) -> Hold {
        let pending = PendingRelease()
        return Hold(
            start: { release in
                pending.arm(release)
                queue.asyncAfter(deadline: .now() + .milliseconds(milliseconds)) { pending.release(.success(())) }
            },
            cancel: { error in pending.release(.failure(error)) })
    }
}
