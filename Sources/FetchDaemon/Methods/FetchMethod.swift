import FetchEngine
import FoundationEssentials
import Glibc
import JSONRPC

/// `fetch`: the request model plus how to return the body; the body comes back in the
/// answer (up to `maxBodyBytes`). Started on the thread that read it, answered from the
/// engine thread (see `JobRunner.start`).
struct FetchMethod: ReplyingRPCMethod {
    static let name = "fetch"

    enum BodyMode: String, CaseIterable {
        case auto, text, base64, json, none
    }

    struct Params {
        var model: RequestModel
        var bodyMode = BodyMode.auto
        var maxBodyBytes = 64 << 20

        init(_ params: JSONValue?, policy: FilePolicy) throws {
            var reader = try ParamReader(params)
            model = try RequestModel(reading: &reader, allowsBody: true, policy: policy)
            (bodyMode, maxBodyBytes) = try Self.readBodyOptions(&reader)
            try reader.finish()
        }

        /// `responseBody` and `maxBodyBytes`, shared with `upload`.
        static func readBodyOptions(_ reader: inout ParamReader) throws -> (BodyMode, Int) {
            var mode = BodyMode.auto
            if let text = try reader.string("responseBody") {
                guard let parsed = BodyMode(rawValue: text) else {
                    let choices = BodyMode.allCases.map(\.rawValue).joined(separator: ", ")
                    throw RPCError.invalidParams(field: reader.field("responseBody"), "expected one of \(choices)")
                }
                mode = parsed
            }
            let limit = try reader.integer("maxBodyBytes", in: 0...(1 << 30)) ?? 64 << 20
            return (mode, limit)
        }
    }

    let runner: JobRunner
    let policy: FilePolicy

    func start(_ params: JSONValue?, context: RPCContext, reply: @escaping Reply) throws {
        let params = try Params(params, policy: policy)
        let startedAt = ContinuousClock.now
        let request = params.model.httpRequest(maxBodyBytes: params.maxBodyBytes)
        try runner.start(params.model, request: request, context: context, answer: { job, response in
            var result = ResponseFields.common(job: job, response: response, startedAt: startedAt)
            result["bytes"] = JSONValue(response.body.count)
            Self.addBody(response.body, mode: params.bodyMode, to: &result)
            return .object(result)
        }, reply: reply)
    }

    /// auto: text when the bytes are UTF-8, else base64. json: parsed; when the body is not
    /// JSON it comes back as auto would, with `jsonError` saying why.
    static func addBody(_ body: [UInt8], mode: BodyMode, to result: inout JSONObject) {
        switch mode {
        case .none: break
        case .base64: result["bodyBase64"] = .string(Data(body).base64EncodedString())
        case .text: result["body"] = .string(String(decoding: body, as: UTF8.self))
        case .auto: addAuto(body, to: &result)
        case .json:
            do {
                result["json"] = try JSONCodec.decode(body)
            } catch {
                result["jsonError"] = .string(error.message)
                addAuto(body, to: &result)
            }
        }
    }

    private static func addAuto(_ body: [UInt8], to result: inout JSONObject) {
        if let text = String(validating: body, as: UTF8.self) {
            result["body"] = .string(text)
        } else {
            result["bodyBase64"] = .string(Data(body).base64EncodedString())
        }
    }
}
