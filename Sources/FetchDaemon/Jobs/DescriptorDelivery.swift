import FetchEngine
import JSONRPC

/// `bodyTo: "fd"`: the body written, as it arrives and in order, to the descriptor the client
/// passed with its request line, by the engine's `DescriptorSink` (a thread of its own: the
/// engine thread never waits on the descriptor, and never changes its flags). The answer has
/// no body member: `bytes` written and their `sha256`.
final class DescriptorDelivery: BodyDelivery, BodyReceiver {
    let sink: DescriptorSink
    private let policy: RetryPolicy
    /// Something was handed to the sink: from then on the job is not retried.
    private let committed = Locked(false)

    init(sink: DescriptorSink, policy: RetryPolicy) {
        self.sink = sink
        self.policy = policy
    }

    var receiver: (any BodyReceiver)? { self }

    var delivered: Int64? {
        committed.withLock { $0 } ? sink.bytesWritten : nil
    }

    func bind(_ job: Job) {}

    func deliverRest(_ response: HTTPResponse, _ job: Job, then done: @escaping @Sendable ((any Error)?) -> Void) {
        guard response.streamedBytes == nil, !response.body.isEmpty else { return done(nil) }
        committed.withLock { $0 = true }
        sink.write(all: response.body)
        let sink = self.sink
        sink.whenWritten { failure in
            done(failure.map { error in
                StreamCommit.streamedFailure(JobFailed(jobID: job.id, attempts: job.attempts, error: error),
                                             delivered: sink.bytesWritten)
            })
        }
    }

    func addResult(_ response: HTTPResponse, to result: inout JSONObject) {
        result.append(distinctKey: "bytes", .integer(sink.bytesWritten))
        result.append(distinctKey: "sha256", .string(sink.sha256))
    }

    func close() {
        sink.close()
    }

    // MARK: BodyReceiver (engine thread)

    func begin(_ head: ResponseHead) -> Bool {
        StreamCommit.isFinal(status: head.status, policy: policy)
    }

    func receive(_ bytes: UnsafeRawBufferPointer, resume: @escaping @Sendable () -> Void) -> BodyTake {
        let taken = sink.write(bytes, resume: resume)
        if taken == .all { committed.withLock { $0 = true } }
        return taken
    }

    func transferEnded(succeeded: Bool, _ done: @escaping @Sendable (TransferError?) -> Void) {
        // What arrived before a failure is written too, as curl writes it; a cancel abandons it.
        sink.flush()
        sink.whenWritten(done)
    }

    func abandon() {
        sink.abandon()
    }

    var failure: TransferError? { sink.failure }
    var runsOnBulkThread: Bool { true }
}
