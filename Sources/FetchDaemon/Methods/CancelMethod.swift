import JSONRPC

/// `cancel {jobId}` from any connection: stops a queued, running or waiting job, whose own
/// request is then answered with -32002.
struct CancelMethod: InlineRPCMethod {
    static let name = "cancel"

    let jobs: JobRegistry

    func callInline(_ params: JSONValue?, context: RPCContext) throws -> JSONValue {
        var reader = try ParamReader(params)
        let jobID = try reader.requiredString("jobId")
        try reader.finish()
        return ["cancelled": .bool(jobs.cancel(jobID: jobID, by: .cancel))]
    }
}
