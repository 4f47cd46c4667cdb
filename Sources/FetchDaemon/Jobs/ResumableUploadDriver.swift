import FetchEngine
import FoundationEssentials
import Glibc
import JSONRPC

/// Sends a `ResumableUpload`'s requests: the start, each chunk from the file, a query after
/// a failure, and the cancel command when the job is cancelled. Failures count against the
/// request's retry policy, with its backoff between them.
struct ResumableUploadDriver: Sendable {
    let runner: JobRunner

    func upload(path: String, file: UploadMethod.FileParam, chunkSize: Int64, params: UploadMethod.Params,
                context: RPCContext) async throws -> (Job, HTTPResponse) {
        var info = stat()
        guard stat(path, &info) == 0 else { throw TransferFileError(path: path, detail: String(cString: strerror(errno))) }
        var session = ResumableUpload(fileSize: Int64(info.st_size), chunkSize: chunkSize, contentType: file.mimetype)
        let model = params.model
        var base = model.httpRequest(maxBodyBytes: params.maxBodyBytes)
        base.body = .none
        base.method = model.method

        return try await runner.runJob(model, method: base.method, url: base.url, context: context) { job, onProgress in
            var policy = model.retryPolicy
            policy.enabled = model.retry.enabled ?? true  // a resumable upload exists to survive failures
            let jitter = Double.random(in: 0..<1)
            var failures = 0
            var waited = 0.0

            var start = base
            start.headers += session.startHeaders()
            let started = try await job.attempt(start, host: HostKey(model.url), priority: model.priority, on: runner.services, onProgress: onProgress)
            do {
                try session.started(status: started.status, headers: started.headers)
            } catch {
                return (job, started)  // not a resumable endpoint: its answer is the result
            }
            var last = started
            do {
                while session.next != .finished {
                    var request = base
                    request.url = session.uploadURL ?? base.url
                    request.method = "PUT"
                    request.headers = base.headers.filter { !$0.name.lowercased().hasPrefix("content-type") } + session.headers(for: session.next)
                    if case .chunk(let offset, let length, _) = session.next {
                        request.body = .fileRange(path: path, offset: offset, length: length)
                        request.headers.append(HTTPHeader("Content-Type", "application/octet-stream"))
                    }
                    var failedWith: RetryPolicy.Outcome? = nil
                    // A chunk that failed in transport: when no retry follows, that failure is
                    // the job's outcome, never an earlier answer (the file did not get there).
                    var transportFailure: JobFailed? = nil
                    do {
                        // The upload URL may name another host: its limits apply.
                        let host = (try? RequestURL(request.url)).map(HostKey.init) ?? HostKey(model.url)
                        let answer = try await job.attempt(request, host: host, priority: model.priority, on: runner.services, onProgress: onProgress)
                        last = answer
                        try session.answered(status: answer.status, headers: answer.headers)
                        if !(200...299).contains(answer.status) && session.next != .finished {
                            // A refused chunk while the session is active (a wrong offset after
                            // a silent re-send, say) is resolved by asking the server where it
                            // stands: that query is the retry, whatever the status.
                            if session.next == .query && answer.status != 404 {
                                failures += 1
                                if failures >= policy.maxAttempts { return (job, last) }
                                continue
                            }
                            failedWith = .status(answer.status, retryAfter: nil)
                        }
                    } catch let failed as JobFailed {
                        session.failed()
                        failedWith = .failure(failed.error.kind)
                        transportFailure = failed
                        if failures + 1 >= policy.maxAttempts { throw failed }
                    }
                    guard let outcome = failedWith else { continue }
                    failures += 1
                    // 404 means the session is gone: nothing to resume.
                    if case .status(404, _) = outcome { return (job, last) }
                    let decision = policy.decide(attempt: failures, outcome: outcome, waitedSoFar: waited, jitter: jitter, now: Date())
                    guard case .retry(let wait, let reason) = decision else {
                        if let transportFailure { throw transportFailure }
                        return (job, last)
                    }
                    runner.announceRetry(job, model: model, context: context, wait: wait, reason: reason)
                    try await job.waitBeforeRetry(seconds: wait)
                    waited += wait
                }
            } catch let cancelled as JobCancelled {
                sendCancelCommand(session, base: base)
                throw cancelled
            }
            return (job, last)
        }
    }

    /// Tells the server to drop the session; nobody waits for its answer.
    private func sendCancelCommand(_ session: ResumableUpload, base: HTTPRequest) {
        guard let url = session.uploadURL else { return }
        var request = base
        request.url = url
        request.method = "PUT"
        request.body = .none
        request.headers = base.headers + session.cancelHeaders()
        request.timeoutMs = min(request.timeoutMs, 10_000)
        try? runner.engine.start(request, id: runner.jobs.freshTransferID()) { _ in }
    }
}
