import FetchEngine
import JSONRPC

/// What a method asks for, decoded once from its params: the kind of job, the request model,
/// the base request of every attempt, the stages it passes through, and how its answer is
/// made from the final response. `JobDriver` runs it.
final class JobSpec: Sendable {
    enum Kind: String, Sendable {
        case fetch, download, upload
    }

    /// Makes the answer from the response the stages settled on (errors are answered as
    /// they are). `blocking`: it does file work (a download lands), so it runs on the
    /// blocking threads; otherwise on the thread that finished the job, or beside it.
    struct Answer: Sendable {
        let blocking: Bool
        let make: @Sendable (Job, HTTPResponse) throws -> JSONValue
    }

    // Stored in this order so that the one-byte fields share the last word: the instance
    // (1,000 bytes) stays below malloc's large-chunk size (1,024 with its header), where an
    // allocation takes the slow path and consolidates the fast bins.
    let model: RequestModel
    /// The request URL's host, whose limits apply (parsed once).
    let host: HostKey
    let request: HTTPRequest
    let stages: [any Stage]
    /// `durable: true` (download and upload): what is written to the state directory, so the
    /// job is resumed after a restart.
    var durableRecord: DurableStore.Record? { durableBox.value }
    var durable: Bool { durableBox.isPresent }
    /// 136 bytes inline would keep every spec above that size.
    private let durableBox: Rare<DurableStore.Record>
    let answer: Answer
    /// Where the response body goes as it arrives (`BodyDelivery`); nil: it is kept in memory
    /// for the answer, as every download's, upload's and non-streaming fetch's.
    let delivery: (any BodyDelivery)?
    let retryPolicy: RetryPolicy
    let kind: Kind
    /// The stages prepare each attempt on the blocking threads: they or the transfer open
    /// files the client named, which is never done on the thread that reads requests.
    let preparesOnWorker: Bool

    /// `request` is consumed: the caller's (usually a temporary) moves into the spec.
    init(kind: Kind, model: RequestModel, request: consuming HTTPRequest, stages: [any Stage], retryPolicy: RetryPolicy? = nil,
         preparesOnWorker: Bool = false, durableRecord: DurableStore.Record? = nil, delivery: (any BodyDelivery)? = nil,
         answer: Answer) {
        durableBox = Rare(durableRecord)
        self.kind = kind
        self.model = model
        host = HostKey(model.url)
        self.preparesOnWorker = preparesOnWorker || request.usesLocalFiles
        self.request = request
        self.stages = stages
        self.retryPolicy = retryPolicy ?? model.retryPolicy
        self.answer = answer
        self.delivery = delivery
    }
}
