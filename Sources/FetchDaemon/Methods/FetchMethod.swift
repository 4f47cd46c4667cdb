import FetchEngine
import JSONRPC

/// `fetch`: the request model plus how to return the body; the body comes back in the
/// answer (up to `maxBodyBytes`), or streams (`responseBody: "stream"`, `bodyTo: "fd"`:
/// `BodyDelivery`), and the request body may come from a descriptor (`bodyFrom: "fd"`).
/// Started on the thread that read it (one that names files under `--allow-dir`: on the
/// blocking threads, once they are checked) and, when nothing waits, answered from the
/// engine thread that finished it (see `JobDriver`).
struct FetchMethod: ReplyingRPCMethod {
    static let name = "fetch"

    struct Params {
        var model: RequestModel
        var bodyMode = ResponseBody.Mode.auto
        var maxBodyBytes = 64 << 20
        var passed = PassedBodies()

        /// `descriptors`: those that came with the request's line (`bodyFrom`, `bodyTo`).
        init(_ params: JSONValue?, policy: FilePolicy, descriptors: LineDescriptors? = nil) throws {
            var reader = try ParamReader(params)
            var model = try RequestModel(reading: &reader, allowsBody: true, policy: policy)
            (bodyMode, maxBodyBytes) = try ResponseBody.readOptions(&reader, streaming: true)
            if !reader.readAll {
                passed = try PassedBodies(reading: &reader, model: model, mode: bodyMode, descriptors: descriptors)
                if passed.from != nil && !passed.methodGiven { model.method = "POST" }
            }
            try reader.finish()
            // Stored once nothing more can throw: no copy of a half-made self for the error path.
            self.model = model
        }
    }

    let driver: JobDriver
    let policy: FilePolicy
    /// The answer's body for each mode that does not stream, made once.
    let wholeBodies = WholeBodyDelivery.byMode()

    func start(_ params: JSONValue?, context: RPCContext, reply: @escaping Reply) throws {
        guard policy.resolvesPaths else {
            return try driver.start(spec(Params(params, policy: policy, descriptors: context.descriptors)), context: context,
                                    reply: reply)
        }
        // With --allow-dir, the files it names are checked on the blocking threads (realpath)
        // before the job is registered.
        let driver = driver
        // The descriptors that came with the line wait for it: they are closed once it is answered.
        let descriptors = context.descriptors
        try policy.decodeCheckingPaths(on: driver.services.blocking, { try spec(Params(params, policy: $0, descriptors: descriptors)) },
                                       then: { try driver.start($0, context: context, reply: reply) },
                                       failed: { reply(.failure($0)) })
    }

    private func spec(_ params: consuming Params) -> JobSpec {
        let whole = wholeBodies[params.bodyMode] ?? WholeBodyDelivery(mode: params.bodyMode)
        return params.spec(driver.services, whole: whole)
    }
}

extension FetchMethod.Params {
    /// The job these params ask for. They end here: their model moves into the spec, with no
    /// copy of its fields (a copy of the params cost about 1k instructions per request).
    consuming func spec(_ services: JobServices, whole: WholeBodyDelivery) -> JobSpec {
        var request = model.httpRequest(maxBodyBytes: maxBodyBytes)
        // A body that streams: delivered as it arrives, and judged first (BodyDeliveryStage).
        let streams = passed.delivery(mode: bodyMode, policy: model.retryPolicy)
        passed.apply(to: &request, delivery: streams)
        var stages = passed.stage(delivery: streams).map { Pipeline.stages(services, adding: [$0]) } ?? Pipeline.stages(services)
        if let events = streams as? EventsDelivery {
            // Every connection asks for the stream (a reconnection with Last-Event-ID) before
            // any stage sees it, and none is answered or collapsed by the HTTP cache.
            stages.insert(EventStreamStage(delivery: events), at: 0)
            model.cache = .noStore
        }
        let delivery: any BodyDelivery = streams ?? whole
        return JobSpec(
            kind: .fetch, model: model, request: request, stages: stages, delivery: streams,
            answer: JobSpec.Answer(blocking: false) { job, response in
                var result = ResponseFields.common(job: job, response: response)
                delivery.addResult(response, to: &result)
                return .object(result)
            })
    }
}
