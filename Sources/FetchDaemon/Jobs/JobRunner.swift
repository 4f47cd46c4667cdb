import FetchEngine
import JSONRPC

/// Runs a request model as a job: registers it, performs it on the engine, and always
/// unregisters it, whatever the outcome. `fetch`, `download` and `upload` share it.
struct JobRunner: Sendable {
    let engine: HTTPEngine
    let jobs: JobRegistry

    func run<Result: Sendable>(
        _ model: RequestModel, request: HTTPRequest, context: RPCContext,
        body: (Job, HTTPResponse) throws -> Result
    ) async throws -> Result {
        let job = try jobs.register(
            jobID: model.jobID, connectionID: context.connectionID, detach: model.detach,
            method: request.method, url: request.url, comment: model.comment)
        var succeeded = false
        defer { jobs.finish(job, succeeded: succeeded) }
        var onProgress: (@Sendable (TransferProgress) -> Void)? = nil
        if model.progress {
            let jobID = job.id
            onProgress = { progress in
                context.notify("progress", ResponseFields.progress(jobID: jobID, progress))
            }
        }
        let response = try await job.attempt(request, on: engine, onProgress: onProgress)
        let result = try body(job, response)
        succeeded = true
        return result
    }
}
