import FetchEngine
import Foundation
import JSONRPC

/// Runs a request model as a job: registers it, performs it on the engine, and always
/// unregisters it, whatever the outcome. `fetch`, `download` and `upload` share it.
struct JobRunner: Sendable {
    let jobs: JobRegistry
    var services: JobServices { jobs.services }
    var engine: HTTPEngine { jobs.services.engine }

    /// Runs one request, the same on every attempt.
    func run<Result: Sendable>(
        _ model: RequestModel, request: HTTPRequest, context: RPCContext,
        body: (Job, HTTPResponse) async throws -> Result
    ) async throws -> Result {
        try await run(model, method: request.method, url: request.url, context: context, prepare: { request }, body: body)
    }

    /// Runs a request that `prepare` makes anew before each attempt (a download continues
    /// from what the previous attempt wrote).
    func run<Result: Sendable>(
        _ model: RequestModel, method: String, url: String, context: RPCContext,
        prepare: () async throws -> HTTPRequest,
        body: (Job, HTTPResponse) async throws -> Result
    ) async throws -> Result {
        try await runJob(model, method: method, url: url, context: context) { job, onProgress in
            let response = try await attemptWithRetries(job, model: model, prepare: prepare, context: context, onProgress: onProgress)
            return try await body(job, response)
        }
    }

    /// Registers the job, runs `work` with the job and its progress reporter, and always
    /// unregisters it. For requests that drive their own sequence of attempts.
    func runJob<Result: Sendable>(
        _ model: RequestModel, method: String, url: String, context: RPCContext,
        work: (Job, (@Sendable (TransferProgress) -> Void)?) async throws -> Result
    ) async throws -> Result {
        let job = try jobs.register(
            jobID: model.jobID, connectionID: context.connectionID, detach: model.detach,
            method: method, url: url, comment: model.comment)
        var succeeded = false
        var outcome = HARBuilder.JobOutcome.succeeded
        let startedAt = ContinuousClock.now
        services.log.debug("job \(job.id) from connection \(context.connectionID): \(method) \(url)")
        defer {
            jobs.finish(job, succeeded: succeeded)
            services.httpLog.jobFinished(job, outcome: outcome)
            services.log.debug("job \(job.id): \(outcome.text) after \(job.attempts) attempt(s), \(ContinuousClock.now - startedAt)")
        }
        var onProgress: (@Sendable (TransferProgress) -> Void)? = nil
        if model.progress {
            let jobID = job.id
            onProgress = { progress in
                context.notify("progress", ResponseFields.progress(jobID: jobID, progress))
            }
        }
        do {
            let result = try await work(job, onProgress)
            succeeded = true
            return result
        } catch let cancelled as JobCancelled {
            outcome = .cancelled(cancelled.by.rawValue)
            throw cancelled
        } catch {
            outcome = .failed(ErrorMapping.rpcError(for: error).message)
            throw error
        }
    }

    /// A 429 or 503 with Retry-After holds every client's new requests to that host until
    /// then (capped by the job's maxInterval), whether or not this job retries.
    func pauseHostIfAsked(status: Int, retryAfter: String?, url: String, policy: RetryPolicy) {
        guard RetryPolicy.retryAfterStatuses.contains(status), let retryAfter,
              let seconds = RetryAfter.seconds(from: retryAfter, now: Date()), seconds > 0,
              let parsed = try? RequestURL(url) else { return }
        services.admission.pause(HostKey(parsed), seconds: min(seconds, policy.maxInterval))
        services.log.info("pausing \(HostKey(parsed)) for \(min(seconds, policy.maxInterval)) s: status \(status) with Retry-After")
    }

    /// Tells the client about a wait before another attempt (when it asked for progress).
    func announceRetry(_ job: Job, model: RequestModel, context: RPCContext, wait: Double, reason: String) {
        guard model.progress else { return }
        context.notify("retrying", [
            "jobId": .string(job.id), "attempt": JSONValue(job.attempts + 1),
            "delayMs": JSONValue(Int((wait * 1000).rounded())), "reason": .string(reason),
        ])
    }

    /// Attempts until the retry policy says stop; the whole request is sent again each
    /// time (a body file is read again). The last response is the result; a network failure
    /// on the last attempt is the error.
    private func attemptWithRetries(
        _ job: Job, model: RequestModel, prepare: () async throws -> HTTPRequest, context: RPCContext,
        onProgress: (@Sendable (TransferProgress) -> Void)?
    ) async throws -> HTTPResponse {
        let policy = model.retryPolicy
        var jitter: Double? = nil  // drawn at the first retry: no getrandom per request
        var waited = 0.0
        while true {
            let outcome: RetryPolicy.Outcome
            var failure: JobFailed? = nil
            var response: HTTPResponse? = nil
            do {
                let request = try await prepare()
                let answer = try await job.attempt(request, host: HostKey(model.url), priority: model.priority, on: services, onProgress: onProgress)
                response = answer
                let retryAfter = answer.headers.last(named: "Retry-After")
                outcome = .status(answer.status, retryAfter: retryAfter)
                pauseHostIfAsked(status: answer.status, retryAfter: retryAfter, url: request.url, policy: policy)
            } catch let failed as JobFailed {
                failure = failed
                outcome = .failure(failed.error.kind)
            }
            if jitter == nil && !(outcome.isFinalSuccess) { jitter = Double.random(in: 0..<1) }
            let decision = policy.decide(attempt: job.attempts, outcome: outcome, waitedSoFar: waited, jitter: jitter ?? 0, now: Date())
            guard case .retry(let wait, let reason) = decision else {
                if let response { return response }
                throw failure!
            }
            announceRetry(job, model: model, context: context, wait: wait, reason: reason)
            try await job.waitBeforeRetry(seconds: wait)
            waited += wait
        }
    }
}
