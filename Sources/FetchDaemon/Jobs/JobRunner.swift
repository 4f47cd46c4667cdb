import FetchEngine
import FoundationEssentials
import Glibc
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
            // Settled before its result is made (a download lands): a cancel after this is too late.
            return try await body(job, Self.settle(job, .success(response)).get())
        }
    }

    /// Registers the job, runs `work` with the job and its progress reporter, and always
    /// unregisters it. For requests that drive their own sequence of attempts.
    func runJob<Result: Sendable>(
        _ model: RequestModel, method: String, url: String, context: RPCContext,
        work: (Job, (@Sendable (TransferProgress) -> Void)?) async throws -> Result
    ) async throws -> Result {
        let job = try register(model, method: method, url: url, context: context)
        let startedAt = ContinuousClock.now
        // Its bodies were read into memory (an upload's answer, a download's error body).
        defer { job.bodyBudget?.release(job.transferID) }
        do {
            // A cancel that was acknowledged wins over a result that raced it.
            let result = try Self.settle(job, .success(try await work(job, progressReporter(job, model: model, context: context)))).get()
            finished(job, startedAt: startedAt, error: nil)
            return result
        } catch {
            let error = Self.settled(job, error)
            finished(job, startedAt: startedAt, error: error)
            throw error
        }
    }

    /// Runs one request without a task when it can: the first attempt starts on the calling
    /// thread when its host has room, and when it needs no retry, `answer` runs and `reply`
    /// is called on the engine thread that finished it. A job that queues behind its host,
    /// retries, or has a large body to turn into an answer continues in a task.
    /// What `answer` throws, or why the job failed, goes to `reply`; registration errors
    /// are thrown here.
    func start(
        _ model: RequestModel, request: HTTPRequest, context: RPCContext,
        answer: @escaping @Sendable (Job, HTTPResponse) throws -> JSONValue,
        reply: @escaping ReplyingRPCMethod.Reply
    ) throws {
        let job = try register(model, method: request.method, url: request.url, context: context)
        let startedAt = ContinuousClock.now
        let onProgress = progressReporter(job, model: model, context: context)
        let complete: @Sendable (Swift.Result<HTTPResponse, any Error>) -> Void = { ended in
            // Settled where it ended: a cancel acknowledged before this wins, one after it
            // answers false, even while the answer is still being made.
            let outcome = Self.settle(job, ended)
            let deliver = { @Sendable in
                let result = Swift.Result { try answer(job, outcome.get()) }
                finished(job, startedAt: startedAt, error: result.failureValue)
                reply(result)
                // The answer is queued now (and counted as the connection's outbound bytes).
                job.bodyBudget?.release(job.transferID)
            }
            // Turning a large body into text or base64 is not work for the engine thread; nor is
            // any answer while other transfers are running: they go on while it is built.
            if case .success(let response) = outcome, response.body.count > Self.inlineAnswerBodyBytes {
                Task(executorPreference: services.tasks) { deliver() }
            } else if services.engine.activeTransfers >= Self.handOffAnswersAboveActive {
                services.answers.execute(deliver)
            } else {
                deliver()
            }
        }
        let retries = { @Sendable (state: RetryState, wait: Retry?) -> Void in
            Task(executorPreference: services.tasks) {
                do {
                    complete(.success(try await attemptWithRetries(
                        job, model: model, prepare: { request }, context: context,
                        onProgress: onProgress, state: state, firstWait: wait)))
                } catch {
                    complete(.failure(error))
                }
            }
        }
        // Files the client named are never opened on the thread that read the request (the
        // engine thread): such a job starts in a task.
        if request.usesLocalFiles { return retries(RetryState(), nil) }
        let started: Bool
        do {
            started = try job.attemptNow(request, host: HostKey(model.url), priority: model.priority, on: services,
                                         onProgress: onProgress) { outcome in
                var state = RetryState()
                switch judge(outcome, job: job, model: model, url: request.url, state: &state) {
                case .final(let result): complete(result)
                case .retry(let wait): retries(state, wait)
                }
            }
        } catch {
            return complete(.failure(error))
        }
        if !started { retries(RetryState(), nil) }
    }

    /// Settles a job whose outcome is decided, success or failure; if a cancel came first,
    /// the cancel is its outcome.
    private static func settle<Value>(_ job: Job, _ outcome: Swift.Result<Value, any Error>) -> Swift.Result<Value, any Error> {
        if case .failure(let error) = outcome, error is JobCancelled { return outcome }
        if let by = job.settle() { return .failure(JobCancelled(jobID: job.id, by: by)) }
        return outcome
    }

    private static func settled(_ job: Job, _ error: any Error) -> any Error {
        settle(job, Swift.Result<Void, any Error>.failure(error)).failureValue ?? error
    }

    /// Bodies up to this size become the answer on the engine thread; larger ones in a task.
    static let inlineAnswerBodyBytes = 256 << 10
    /// With this many transfers still running, answers are built on the answer worker.
    static let handOffAnswersAboveActive = 4

    private func register(_ model: RequestModel, method: String, url: String, context: RPCContext) throws -> Job {
        let job = try jobs.register(
            jobID: model.jobID, connectionID: context.connectionID, detach: model.detach,
            method: method, url: url, comment: model.comment)
        // The logger redacts the URL's secrets and escapes what the client chose.
        let comment = model.comment.map { ", comment: \($0)" } ?? ""
        services.log.debug("job \(job.id) from connection \(context.connectionID): \(method) \(url)\(comment)")
        return job
    }

    /// Unregisters the job, writes its HTTP log, and counts it as finished or failed.
    private func finished(_ job: Job, startedAt: ContinuousClock.Instant, error: (any Error)?) {
        let outcome: HARBuilder.JobOutcome
        switch error {
        case nil: outcome = .succeeded
        case let cancelled as JobCancelled: outcome = .cancelled(cancelled.by.rawValue)
        case let error?: outcome = .failed(ErrorMapping.rpcError(for: error).message)
        }
        jobs.finish(job, succeeded: error == nil)
        services.httpLog.jobFinished(job, outcome: outcome)
        services.log.debug("job \(job.id): \(outcome.text) after \(job.attempts) attempt(s), \(ContinuousClock.now - startedAt)")
    }

    private func progressReporter(_ job: Job, model: RequestModel, context: RPCContext) -> (@Sendable (TransferProgress) -> Void)? {
        guard model.progress else { return nil }
        let jobID = job.id
        return { progress in
            context.notify("progress", ResponseFields.progress(jobID: jobID, progress))
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

    /// A wait before the next attempt, and why.
    struct Retry: Sendable {
        let wait: Double
        let reason: String
    }

    /// A job's retry bookkeeping across its attempts.
    struct RetryState: Sendable {
        /// Drawn at the first retry: no getrandom per request.
        var jitter: Double?
        var waited = 0.0
    }

    /// What an attempt's outcome means for its job: the result, or another attempt.
    enum Verdict {
        case final(Swift.Result<HTTPResponse, any Error>)
        case retry(Retry)
    }

    /// Judges one attempt by the job's retry policy. A 429 or 503 with Retry-After also
    /// pauses the host for everyone. Only statuses and transfer failures are retried, never
    /// a cancel or a local error.
    private func judge(
        _ outcome: Swift.Result<HTTPResponse, any Error>, job: Job, model: RequestModel, url: String,
        state: inout RetryState
    ) -> Verdict {
        let policy = model.retryPolicy
        let judged: RetryPolicy.Outcome
        switch outcome {
        case .success(let answer):
            let retryAfter = answer.headers.last(named: "Retry-After")
            judged = .status(answer.status, retryAfter: retryAfter)
            pauseHostIfAsked(status: answer.status, retryAfter: retryAfter, url: url, policy: policy)
        case .failure(let failed as JobFailed):
            judged = .failure(failed.error.kind)
        case .failure:
            return .final(outcome)
        }
        if state.jitter == nil && !judged.isFinalSuccess { state.jitter = Double.random(in: 0..<1) }
        let decision = policy.decide(attempt: job.attempts, outcome: judged, waitedSoFar: state.waited,
                                     jitter: state.jitter ?? 0, now: Date())
        guard case .retry(let wait, let reason) = decision else { return .final(outcome) }
        return .retry(Retry(wait: wait, reason: reason))
    }

    /// Attempts until the retry policy says stop; the whole request is sent again each
    /// time (a body file is read again). The last response is the result; a network failure
    /// on the last attempt is the error. `firstWait`: a retry already decided.
    private func attemptWithRetries(
        _ job: Job, model: RequestModel, prepare: () async throws -> HTTPRequest, context: RPCContext,
        onProgress: (@Sendable (TransferProgress) -> Void)?, state: RetryState = RetryState(), firstWait: Retry? = nil
    ) async throws -> HTTPResponse {
        var state = state
        var pending = firstWait
        while true {
            if let retry = pending {
                announceRetry(job, model: model, context: context, wait: retry.wait, reason: retry.reason)
                try await job.waitBeforeRetry(seconds: retry.wait)
                state.waited += retry.wait
            }
            let request = try await prepare()
            let outcome: Swift.Result<HTTPResponse, any Error>
            do {
                outcome = .success(try await job.attempt(request, host: HostKey(model.url), priority: model.priority,
                                                         on: services, onProgress: onProgress))
            } catch {
                outcome = .failure(error)
            }
            switch judge(outcome, job: job, model: model, url: request.url, state: &state) {
            case .final(let result): return try result.get()
            case .retry(let retry): pending = retry
            }
        }
    }
}

extension Result {
    /// The error, or nil on success.
    var failureValue: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
