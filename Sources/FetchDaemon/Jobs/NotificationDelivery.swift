import FetchEngine
import FoundationEssentials
import JSONRPC

/// `responseBody: "stream"`: a `responseHead` notification as soon as the answer's head is
/// final, then the body in `bodyChunk` notifications (`offset`, `dataBase64`), in order, then
/// the answer without a body member (`bytes` sent). Each chunk counts against the
/// connection's body budget before it is sent (`NotificationOutlet`): a client that does not
/// read pauses this transfer, and nothing else.
final class NotificationDelivery: OutletDelivery {
    private let policy: RetryPolicy
    private let state = Locked(State())
    let slot = OutletSlot()

    private struct State {
        /// A head was sent: from then on the job is not retried.
        var headSent = false
        /// Body bytes sent so far (the next chunk's offset).
        var sent: Int64 = 0
    }

    /// A body kept in memory goes out in chunks of this size at most.
    static let chunkBytes = 64 << 10

    init(policy: RetryPolicy) {
        self.policy = policy
    }

    var delivered: Int64? {
        state.withLock { $0.headSent ? $0.sent : nil }
    }

    func deliverRest(_ response: HTTPResponse, _ job: Job, then done: @escaping @Sendable ((any Error)?) -> Void) {
        bind(job)
        guard response.streamedBytes == nil, let outlet else { return done(nil) }
        sendHead(ResponseHead(of: response), outlet)
        var offset = 0
        while offset < response.body.count {
            let end = min(offset + Self.chunkBytes, response.body.count)
            let chunk = response.body.withUnsafeBytes { UnsafeRawBufferPointer(rebasing: $0[offset..<end]) }
            outlet.send("bodyChunk", chunkParams(outlet, chunk))
            offset = end
        }
        done(nil)
    }

    func addResult(_ response: HTTPResponse, to result: inout JSONObject) {
        result.append(distinctKey: "bytes", .integer(state.withLock { $0.sent }))
    }

    func close() {}

    private func sendHead(_ head: ResponseHead, _ outlet: NotificationOutlet) {
        state.withLock { $0.headSent = true }
        outlet.sendHead(head)
    }

    /// A chunk's params; counts it as sent.
    private func chunkParams(_ outlet: NotificationOutlet, _ bytes: UnsafeRawBufferPointer) -> JSONValue {
        let offset = state.withLock { s -> Int64 in
            defer { s.sent += Int64(bytes.count) }
            return s.sent
        }
        return [
            "jobId": .string(outlet.jobID), "offset": .integer(offset),
            "dataBase64": .string(Data(bytes).base64EncodedString()),
        ]
    }

    // MARK: BodyReceiver (engine thread)

    func begin(_ head: ResponseHead) -> Bool {
        guard StreamCommit.isFinal(status: head.status, policy: policy), let outlet else { return false }
        sendHead(head, outlet)
        return true
    }

    func receive(_ bytes: UnsafeRawBufferPointer, resume: @escaping @Sendable () -> Void) -> BodyTake {
        guard let outlet else { return .stop }
        return outlet.send("bodyChunk", bodyBytes: bytes.count, resume: resume) { chunkParams(outlet, bytes) } ? .all : .pause
    }

    func transferEnded(succeeded: Bool, _ done: @escaping @Sendable (TransferError?) -> Void) {
        done(nil)  // every chunk is queued for the client already
    }

    func abandon() {}
    var failure: TransferError? { nil }
    var runsOnBulkThread: Bool { false }
}
