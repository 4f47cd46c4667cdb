import JSONRPC

/// `listJobs`: every live job with its state, attempt and bytes. Any client may list every
/// job, so URLs are shown as the logs show them (`JobSeenByOthers`): a userinfo password and
/// secret query values masked.
struct ListJobsMethod: InlineRPCMethod {
    static let name = "listJobs"

    let jobs: JobRegistry

    func callInline(_ params: JSONValue?, context: RPCContext) throws -> JSONValue {
        let reader = try ParamReader(params)
        try reader.finish()
        let list: [JSONValue] = jobs.snapshotsSeenByOthers.map { job, seen in
            let progress = job.progress
            return [
                "jobId": .string(job.jobID), "kind": .string(job.kind.rawValue),
                "method": .string(job.method), "url": .string(seen.redactedURL),
                "state": .string(job.state.contractName), "phase": .string(job.state.name), "attempt": JSONValue(job.attempt),
                "sentBytes": .integer(progress?.sentBytes ?? 0),
                "receivedBytes": .integer(progress?.receivedBytes ?? 0),
                "totalBytes": progress?.totalReceiveBytes.map(JSONValue.integer) ?? .null,
                "comment": JSONValue(job.comment), "durable": .bool(job.durable),
            ]
        }
        return ["jobs": .array(list)]
    }
}
