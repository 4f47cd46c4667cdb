import FetchEngine
import JSONRPC

/// `responseBody: "events"`: Server-Sent Events. Each connection whose answer is a 200
/// `text/event-stream` sends a `responseHead`, then one `sseEvent {jobId, event, data, id?}`
/// per event its body dispatches (`EventStreamParser`, the WHATWG rules; `id` is the stream's
/// last event ID, left out while there is none). When that stream ends or breaks, the job
/// connects again after the server's last `retry` (`EventStreamReconnection`): a new attempt
/// of the same job (`.again`), so it passes every stage, the host's limits included, and
/// `EventStreamStage` sends it with `Last-Event-ID`. An answer that is not an event stream
/// (a 204 among them) is the result, with `events` and `reconnects` beside its own `bytes`
/// and body (none when it is empty).
///
/// The events of each piece of a stream count against the connection's body budget before
/// they are sent (`NotificationOutlet.sendEach`). An event stream that did not stream (a
/// stub's body) is parsed whole when its attempt is judged, as the network's would have been.
final class EventsDelivery: OutletDelivery {
    private let state = Locked(State())
    let slot = OutletSlot()
    /// The result's body, when the answer that ends the job is not a stream.
    private let whole = WholeBodyDelivery(mode: .auto)

    private struct State {
        var parser = EventStreamParser()
        var reconnection = EventStreamReconnection()
        /// The current transfer's body is a stream (`begin` took it).
        var streaming = false
        /// Stream bytes parsed over every connection.
        var bytes: Int64 = 0
        var events = 0
        /// Why a stream could not be parsed (a line or an event over the limit).
        var failure: TransferError?
    }

    var delivered: Int64? {
        state.withLock { $0.reconnection.streams > 0 ? $0.bytes : nil }
    }

    /// What a reconnection sends as `Last-Event-ID` (nil: no stream yet, or no id seen).
    var lastEventIDToSend: String? {
        state.withLock { s in s.reconnection.streams > 0 && !s.parser.lastEventID.isEmpty ? s.parser.lastEventID : nil }
    }

    func judge(_ attempt: Attempt, _ outcome: AttemptOutcome, _ job: Job) -> Verdict {
        let ended: EventStreamReconnection.Ended
        switch outcome {
        case .success(let response):
            if response.streamedBytes == nil, Self.opensStream(response), let failure = streamWhole(response, job) {
                return .fail(failure)
            }
            ended = .answer(status: response.status, contentType: response.headers.last(named: "Content-Type"))
        case .failure(let failed as JobFailed):
            let (streaming, parseFailure) = state.withLock { s in
                defer { s.streaming = false }
                return (s.streaming, s.failure)
            }
            // The stream itself was at fault (a line over the limit): connecting again would repeat it.
            if parseFailure != nil { return .fail(StreamCommit.streamedFailure(failed, delivered: delivered ?? 0)) }
            ended = .failure(failed.error.kind, streaming: streaming)
        case .failure:
            return StreamCommit.verdict(delivered: delivered, outcome: outcome, job: job)
        }
        let now = job.clock.now()
        let decision = state.withLock { s in
            s.streaming = false
            return s.reconnection.decide(ended, retryMs: s.parser.retryMs, now: now, deadline: job.deadline)
        }
        switch decision {
        case .asAnyRequest:
            return .pass
        case .reconnect(let ms):
            return .again(delay: Double(ms) / 1000, reason: "event stream ended")
        case .result:
            return .final
        case .fail, .deadline:
            var failed = outcome.failureValue as? JobFailed
            if decision == .deadline || failed == nil {
                let ms = Int((job.elapsed * 1000).rounded(.down))
                let n = attempt.number
                var error = TransferError(.timeout, "maxTime of \(job.spec.model.maxTime ?? 0) s reached after \(n) attempt\(n == 1 ? "" : "s") in \(ms / 1000).\(ms % 1000 / 100) s")
                error.curlCode = 28
                failed = JobFailed(jobID: job.id, attempts: attempt.number, error: error)
            }
            return .fail(StreamCommit.streamedFailure(failed!, delivered: delivered ?? 0))
        }
    }

    func deliverRest(_ response: HTTPResponse, _ job: Job, then done: @escaping @Sendable ((any Error)?) -> Void) {
        bind(job)
        // An event stream that reached the answer without streaming (a cache hit): its events
        // go out before it, with no reconnection.
        if response.streamedBytes == nil, Self.opensStream(response), let failure = streamWhole(response, job) {
            return done(failure)
        }
        done(nil)
    }

    func addResult(_ response: HTTPResponse, to result: inout JSONObject) {
        let (events, reconnects) = state.withLock { ($0.events, $0.reconnection.reconnects) }
        result.append(distinctKey: "events", JSONValue(events))
        result.append(distinctKey: "reconnects", JSONValue(reconnects))
        // The answer that ended the job, when it is no stream: its body as a fetch's would be
        // (none for an empty body, a 204's).
        guard response.streamedBytes == nil, !Self.opensStream(response) else { return }
        if response.body.isEmpty {
            result.append(distinctKey: "bytes", 0)
        } else {
            whole.addResult(response, to: &result)
        }
    }

    func close() {}

    private static func opensStream(_ response: HTTPResponse) -> Bool {
        EventStreamReconnection.opensStream(status: response.status, contentType: response.headers.last(named: "Content-Type"))
    }

    /// A stream's head: a new stream for the parser, and the head to the client.
    private func opened(_ head: ResponseHead, _ outlet: NotificationOutlet) {
        state.withLock { s in
            s.parser.newStream()
            s.reconnection.opened()
        }
        outlet.sendHead(head)
    }

    /// Parses `bytes` and sends the events they complete through `send`; false when the
    /// stream fails (`State.failure`).
    private func parse(_ bytes: UnsafeRawBufferPointer, _ outlet: NotificationOutlet,
                       _ send: (String, JSONValue) -> Void) -> Bool {
        state.withLock { s in
            var dispatched = 0
            defer { s.events += dispatched }
            do throws(TransferError) {
                try s.parser.feed(bytes) { event in
                    dispatched += 1
                    send("sseEvent", Self.params(outlet, event))
                }
                s.bytes += Int64(bytes.count)
                return true
            } catch {
                s.failure = error
                return false
            }
        }
    }

    private static func params(_ outlet: NotificationOutlet, _ event: EventStreamParser.Event) -> JSONValue {
        var params: JSONObject = ["jobId": .string(outlet.jobID), "event": .string(event.type), "data": .string(event.data)]
        if !event.lastEventID.isEmpty { params.append(distinctKey: "id", .string(event.lastEventID)) }
        return .object(params)
    }

    /// A whole event stream (a stub's body): its head and events go out now; the error that
    /// ends the job when it cannot be parsed.
    private func streamWhole(_ response: HTTPResponse, _ job: Job) -> JobFailed? {
        bind(job)
        guard let outlet else { return nil }
        opened(ResponseHead(of: response), outlet)
        let parsed = response.body.withUnsafeBytes { parse($0, outlet) { outlet.send($0, $1) } }
        state.withLock { $0.parser.finish() }
        guard !parsed, let failure = failure else { return nil }
        return StreamCommit.streamedFailure(JobFailed(jobID: job.id, attempts: job.attempts, error: failure),
                                            delivered: delivered ?? 0)
    }

    // MARK: BodyReceiver (engine thread)

    func begin(_ head: ResponseHead) -> Bool {
        guard EventStreamReconnection.opensStream(status: head.status, contentType: head.headers.last(named: "Content-Type")),
              let outlet else { return false }
        opened(head, outlet)
        state.withLock { $0.streaming = true }
        return true
    }

    func receive(_ bytes: UnsafeRawBufferPointer, resume: @escaping @Sendable () -> Void) -> BodyTake {
        guard let outlet else { return .stop }
        var parsed = true
        let sent = outlet.sendEach(bodyBytes: bytes.count, resume: resume) { send in
            parsed = parse(bytes, outlet, send)
        }
        if !parsed { return .stop }
        return sent ? .all : .pause
    }

    func transferEnded(succeeded: Bool, _ done: @escaping @Sendable (TransferError?) -> Void) {
        // An event that no empty line ended is dropped with its stream (the WHATWG rule).
        state.withLock { $0.parser.finish() }
        done(nil)
    }

    func abandon() {}
    var failure: TransferError? { state.withLock { $0.failure } }
    var runsOnBulkThread: Bool { false }
}
