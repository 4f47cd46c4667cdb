import JSONRPC

/// `getJob {jobId}`: where a live job stands, or how one of the last 1,000 ended jobs ended
/// (its answer redacted as HTTP logs are: protocol.md, "Jobs seen by others").
struct GetJobMethod: InlineRPCMethod {
    static let name = "getJob"

    let jobs: JobRegistry

    func callInline(_ params: JSONValue?, context: RPCContext) throws -> JSONValue {
        var reader = try ParamReader(params)
        let jobID = try reader.requiredString("jobId")
        try reader.finish()
        switch jobs.lookup(jobID) {
        case .live(let job)?:
            // A live job that has just ended shows its last live state until it leaves.
            let state = job.state
            return ["jobId": .string(job.id), "state": .string(state.hasEnded ? "running" : state.contractName),
                    "durable": .bool(job.durable), "restarts": JSONValue(job.restarts)]
        case .ended(let ended)?:
            var result: JSONObject = ["jobId": .string(ended.jobID), "state": .string(ended.state),
                                      "durable": .bool(ended.durable), "restarts": JSONValue(ended.restarts)]
            // Any connection may ask: URLs and headers redacted (JobSeenByOthers).
            switch ended.answerSeenByOthers {
            case .success(let value): result["result"] = value
            case .failure(let error): result["error"] = error.json
            }
            return .object(result)
        case nil:
            throw RPCError.unknownJob
        }
    }
}

extension RPCError {
    /// An id that is neither live nor among the last 1,000 ended jobs (getJob, attach).
    static var unknownJob: RPCError {
        .invalidParams(field: "jobId", "no live job and no recently ended job has this id")
    }
}
