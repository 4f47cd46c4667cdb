import FetchEngine
import JSONRPC

/// `responseBody: "lines"`: a `responseHead` notification once the answer's head is final,
/// then one `bodyLine` per line of the body as it arrives (`LineSplitter`: LF or CRLF removed,
/// invalid UTF-8 replaced, a last line without a newline sent when the body ends, a line over
/// 1 MiB fails the job with kind `protocol`), then the answer with `lines` (the count) and
/// `bytes`, without a body member. The lines of each piece of the body count against the
/// connection's body budget before they are sent (`NotificationOutlet.sendEach`): a client
/// that does not read pauses this transfer, nothing else. A body that did not stream (a stub's,
/// a cache hit, an answer kept until the job settled on it) is cut into lines the same way
/// before the answer.
final class LinesDelivery: OutletDelivery {
    private let policy: RetryPolicy
    private let state = Locked(State())
    let slot = OutletSlot()

    private struct State {
        /// A head was sent: from then on the job is not retried.
        var headSent = false
        /// The current transfer's body is this delivery's (`begin` took it).
        var taking = false
        var splitter = LineSplitter()
        /// Body bytes cut into lines so far.
        var bytes: Int64 = 0
        /// Why the body could not be cut into lines (a line over the limit).
        var failure: TransferError?
    }

    init(policy: RetryPolicy) {
        self.policy = policy
    }

    var delivered: Int64? {
        state.withLock { $0.headSent ? $0.bytes : nil }
    }

    func deliverRest(_ response: HTTPResponse, _ job: Job, then done: @escaping @Sendable ((any Error)?) -> Void) {
        bind(job)
        guard response.streamedBytes == nil, let outlet else { return done(nil) }
        started(ResponseHead(of: response), outlet)
        let failure = state.withLock { s -> TransferError? in
            do throws(TransferError) {
                try s.splitter.feed(response.body) { outlet.send("bodyLine", params(outlet, $0)) }
                try s.splitter.finish { outlet.send("bodyLine", params(outlet, $0)) }
                s.bytes += Int64(response.body.count)
                return nil
            } catch {
                return error
            }
        }
        guard let failure else { return done(nil) }
        done(StreamCommit.streamedFailure(JobFailed(jobID: job.id, attempts: job.attempts, error: failure),
                                          delivered: delivered ?? 0))
    }

    func addResult(_ response: HTTPResponse, to result: inout JSONObject) {
        let (bytes, lines) = state.withLock { ($0.bytes, $0.splitter.lines) }
        result.append(distinctKey: "bytes", .integer(bytes))
        result.append(distinctKey: "lines", JSONValue(lines))
    }

    func close() {}

    /// A body begins: its head goes out, and its lines are counted on from the last body's.
    private func started(_ head: ResponseHead, _ outlet: NotificationOutlet) {
        state.withLock { s in
            s.headSent = true
            s.splitter.reset()
        }
        outlet.sendHead(head)
    }

    private func params(_ outlet: NotificationOutlet, _ line: String) -> JSONValue {
        ["jobId": .string(outlet.jobID), "line": .string(line)]
    }

    // MARK: BodyReceiver (engine thread)

    func begin(_ head: ResponseHead) -> Bool {
        guard StreamCommit.isFinal(status: head.status, policy: policy), let outlet else { return false }
        started(head, outlet)
        state.withLock { $0.taking = true }
        return true
    }

    func receive(_ bytes: UnsafeRawBufferPointer, resume: @escaping @Sendable () -> Void) -> BodyTake {
        guard let outlet else { return .stop }
        var failed = false
        let sent = outlet.sendEach(bodyBytes: bytes.count, resume: resume) { send in
            state.withLock { s in
                do throws(TransferError) {
                    try s.splitter.feed(bytes) { send("bodyLine", params(outlet, $0)) }
                    s.bytes += Int64(bytes.count)
                } catch {
                    s.failure = error
                    failed = true
                }
            }
        }
        if failed { return .stop }
        return sent ? .all : .pause
    }

    func transferEnded(succeeded: Bool, _ done: @escaping @Sendable (TransferError?) -> Void) {
        guard let outlet, state.withLock({ s in defer { s.taking = false }; return s.taking }) else { return done(nil) }
        // The last line, when no newline ended it (at most 1 MiB, beyond the budget's count).
        let failure = state.withLock { s -> TransferError? in
            guard succeeded else {
                s.splitter.reset()
                return nil
            }
            do throws(TransferError) {
                try s.splitter.finish { outlet.send("bodyLine", params(outlet, $0)) }
                return nil
            } catch {
                s.failure = error
                return error
            }
        }
        done(failure)
    }

    func abandon() {}
    var failure: TransferError? { state.withLock { $0.failure } }
    var runsOnBulkThread: Bool { false }
}
