import FetchEngine
import JSONRPC

/// `fetch`: the request model plus how to return the body; the body comes back in the
/// answer (up to `maxBodyBytes`). Started on the thread that read it and, when nothing
/// waits, answered from the engine thread that finished it (see `JobDriver`).
struct FetchMethod: ReplyingRPCMethod {
    static let name = "fetch"

    struct Params {
        var model: RequestModel
        var bodyMode = ResponseBody.Mode.auto
        var maxBodyBytes = 64 << 20

        init(_ params: JSONValue?, policy: FilePolicy) throws {
            var reader = try ParamReader(params)
            model = try RequestModel(reading: &reader, allowsBody: true, policy: policy)
            (bodyMode, maxBodyBytes) = try ResponseBody.readOptions(&reader)
            try reader.finish()
        }
    }

    let driver: JobDriver
    let policy: FilePolicy

    func start(_ params: JSONValue?, context: RPCContext, reply: @escaping Reply) throws {
        let params = try Params(params, policy: policy)
        let bodyMode = params.bodyMode
        let spec = JobSpec(
            kind: .fetch, model: params.model, request: params.model.httpRequest(maxBodyBytes: params.maxBodyBytes),
            stages: Pipeline.stages(driver.services),
            answer: JobSpec.Answer(blocking: false) { job, response in
                var result = ResponseFields.common(job: job, response: response)
                result["bytes"] = JSONValue(response.body.count)
                ResponseBody.add(response.body, mode: bodyMode, to: &result)
                return .object(result)
            })
        try driver.start(spec, context: context, reply: reply)
    }
}
