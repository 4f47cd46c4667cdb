import FetchEngine
import JSONRPC

/// `fetch`: the request model plus how to return the body; the body comes back in the
/// answer (up to `maxBodyBytes`). Started on the thread that read it (one that names files
/// under `--allow-dir`: on the blocking threads, once they are checked) and, when nothing
/// waits, answered from the engine thread that finished it (see `JobDriver`).
struct FetchMethod: ReplyingRPCMethod {
    static let name = "fetch"

    struct Params {
        var model: RequestModel
        var bodyMode = ResponseBody.Mode.auto
        var maxBodyBytes = 64 << 20

        init(_ params: JSONValue?, policy: FilePolicy) throws {
            var reader = try ParamReader(params)
            let model = try RequestModel(reading: &reader, allowsBody: true, policy: policy)
            (bodyMode, maxBodyBytes) = try ResponseBody.readOptions(&reader)
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
            return try driver.start(spec(Params(params, policy: policy)), context: context, reply: reply)
        }
        // With --allow-dir, the files it names are checked on the blocking threads (realpath)
        // before the job is registered.
        let driver = driver
        try policy.decodeCheckingPaths(on: driver.services.blocking, { try spec(Params(params, policy: $0)) },
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
        let request = model.httpRequest(maxBodyBytes: maxBodyBytes)
        return JobSpec(
            kind: .fetch, model: model, request: request, stages: Pipeline.stages(services),
            answer: JobSpec.Answer(blocking: false) { job, response in
                var result = ResponseFields.common(job: job, response: response)
                whole.addResult(response, to: &result)
                return .object(result)
            })
    }
}
