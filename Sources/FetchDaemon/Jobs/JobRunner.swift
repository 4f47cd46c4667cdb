import FetchEngine
import Foundation
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
        let response = try await attemptWithRetries(job, model: model, request: request, context: context, onProgress: onProgress)
        let result = try body(job, response)
        succeeded = true
        return result
    }

    /// Attempts until the retry policy says stop; the whole request is sent again each
    /// time (a body file is read again). The last response is the result; a network failure
    /// on the last attempt is the error.
    private func attemptWithRetries(
        _ job: Job, model: RequestModel, request: HTTPRequest, context: RPCContext,
        onProgress: (@Sendable (TransferProgress) -> Void)?
    ) async throws -> HTTPResponse {
        let policy = model.retryPolicy
        let jitter = Double.random(in: 0..<1)
        var waited = 0.0
        while true {
            let outcome: RetryPolicy.Outcome
            var failure: JobFailed? = nil
            var response: HTTPResponse? = nil
            do {
                let answer = try await job.attempt(request, on: engine, onProgress: onProgress)
                response = answer
                outcome = .status(answer.status, retryAfter: answer.headers.first { $0.name.lowercased() == "retry-after" }?.value)
            } catch let failed as JobFailed {
                failure = failed
                outcome = .failure(failed.error.kind)
            }
            let decision = policy.decide(attempt: job.attempts, outcome: outcome, waitedSoFar: waited, jitter: jitter, now: Date())
            guard case .retry(let wait, let reason) = decision else {
                if let response { return response }
                throw failure!
            }
            if model.progress {
                context.notify("retrying", [
                    "jobId": .string(job.id), "attempt": JSONValue(job.attempts + 1),
                    "delayMs": JSONValue(Int((wait * 1000).rounded())), "reason": .string(reason),
                ])
            }
            try await job.waitBeforeRetry(seconds: wait)
            waited += wait
        }
    }
}
