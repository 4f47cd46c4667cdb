import JSONRPC

/// `cancel {jobId}` from any connection: stops a queued, running or waiting job, whose own
/// request is then answered with -32002.
struct CancelMethod: RPCMethod {
    static let name = "cancel"

    let jobs: JobRegistry

    func call(_ params: JSONValue?, context: RPCContext) async throws -> JSONValue {
        var reader = try ParamReader(params)
        let jobID = try reader.requiredString("jobId")
        try reader.finish()
        return ["cancelled": .bool(jobs.cancel(jobID: jobID, by: .cancel))]
    }
}
