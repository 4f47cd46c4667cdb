import JSONRPC

/// `attach {jobId, progress}` from any connection: answered as the job's own request would
/// be, when the job ends (at once for one of the last 1,000 ended jobs), with its progress
/// and retrying notifications to this connection if asked. The answer's URLs and headers are
/// redacted as HTTP logs are (protocol.md, "Jobs seen by others"): only the job's own request
/// gets them whole.
struct AttachMethod: ReplyingRPCMethod {
    static let name = "attach"

    let jobs: JobRegistry

    func start(_ params: JSONValue?, context: RPCContext, reply: @escaping Reply) throws {
        var reader = try ParamReader(params)
        let jobID = try reader.requiredString("jobId")
        let progress = try reader.bool("progress") ?? false
        try reader.finish()
        switch jobs.attach(jobID, context: context, progress: progress, reply: reply) {
        case .live?: return
        case .ended(let ended)?: reply(ended.answerSeenByOthers.mapError { $0 })
        case nil: throw RPCError.unknownJob
        }
    }
}
