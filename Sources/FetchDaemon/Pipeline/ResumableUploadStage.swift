import FetchEngine
import FoundationEssentials
import JSONRPC

/// Google's resumable upload protocol (`ResumableUpload` says which request comes next): the
/// start, each chunk and each query after a failure are attempts of the one job, so they pass
/// the host's limits and its Retry-After pauses like any attempt, and the retry policy (on by
/// default here: surviving failures is the point) spaces the queries after failures. A chunk
/// that fails with an error that is not retried fails the job with that error. When the job
/// is cancelled, the server is told to drop the session.
///
/// Made per job (with the file and the session a durable job resumes); the session's state
/// lives in the job.
final class ResumableUploadStage: Stage {
    struct State: JobState {
        var session: ResumableUpload
        /// The request the current attempt sends.
        var sent = ResumableUpload.Step.start
        /// The session URL the durable journal holds.
        var writtenURL: String?
    }

    let path: String
    let engine: HTTPEngine
    let freshTransferID: @Sendable () -> UInt64
    /// A durable upload writes its session URL down before the first chunk (`prepare` runs on
    /// the blocking threads), so a restart asks the server for the offset instead of starting over.
    let sessionStarted: (@Sendable (String) throws -> Void)?
    /// The session as the job starts it (resumed at a session URL, for a durable job).
    private let start: State

    init(path: String, fileSize: Int64, chunkSize: Int64, contentType: String, engine: HTTPEngine,
         freshTransferID: @escaping @Sendable () -> UInt64, resuming sessionURL: String? = nil,
         sessionStarted: (@Sendable (String) throws -> Void)? = nil) {
        self.path = path
        self.engine = engine
        self.freshTransferID = freshTransferID
        self.sessionStarted = sessionStarted
        var start = State(session: ResumableUpload(fileSize: fileSize, chunkSize: chunkSize, contentType: contentType))
        if let sessionURL {
            start.session.resume(uploadURL: sessionURL)
            start.writtenURL = sessionURL
        }
        self.start = start
    }

    func initialState(_ job: Job) -> State {
        start
    }

    func prepare(_ attempt: Attempt, _ job: Job) throws -> Preparation {
        // Read, changed and written back by this step alone.
        var state = job.state(of: self)
        defer { job.withState(of: self) { $0 = state } }
        state.sent = state.session.next
        let sent = state.sent, session = state.session
        if let sessionStarted, let url = session.uploadURL, url != state.writtenURL {
            try sessionStarted(url)
            state.writtenURL = url
        }
        guard sent != .start else {
            attempt.request.headers += session.startHeaders()
            return .proceed
        }
        attempt.request = try Self.sessionRequest(session, base: attempt.request, headers: session.headers(for: sent))
        // A session URL on another host (scheme, port) gets no credential of the start's
        // auth rule, as a redirect would not.
        if !attempt.secrets.isEmpty, (try? RequestURL(attempt.request.url)).map(HostKey.init) != job.spec.host {
            attempt.removeSecrets()
        }
        if case .chunk(let offset, let length, _) = sent {
            attempt.request.body = .fileRange(path: path, offset: offset, length: length)
            attempt.request.headers.append(HTTPHeader("Content-Type", "application/octet-stream"))
        }
        return .proceed
    }

    func judge(_ attempt: Attempt, _ outcome: AttemptOutcome, _ job: Job) -> Verdict {
        var state = job.state(of: self)
        defer { job.withState(of: self) { $0 = state } }
        let sent = state.sent
        guard case .success(let answer) = outcome else {
            // On the network: the server may have part of the chunk; the query asks. Whether
            // and when is the retry policy's call; when it stops, this failure is the answer.
            if sent != .start, case .failure(is JobFailed) = outcome { state.session.failed() }
            return .pass
        }
        if sent == .start {
            do {
                try state.session.started(status: answer.status, headers: Array(answer.headers))
            } catch {
                return .final  // not a resumable endpoint: its answer is the result
            }
            return state.session.next == .finished ? .final : .next
        }
        do {
            try state.session.answered(status: answer.status, headers: Array(answer.headers))
        } catch {
            return .fail(error)
        }
        if state.session.next == .finished { return .final }
        guard (200...299).contains(answer.status) else {
            // 404: the session is gone, nothing to resume; that answer is the result.
            guard answer.status != 404 else { return .final }
            // A refused chunk while the session is active (a wrong offset after a silent
            // re-send, say) is resolved by asking the server where it stands.
            let failures = job.withRetry { retry in
                retry.failures += 1
                return retry.failures
            }
            guard failures < job.spec.retryPolicy.maxAttempts else { return .final }
            return .next
        }
        return .next
    }

    func jobEnded(_ job: Job, _ ending: JobEnding) {
        let session = job.state(of: self).session
        guard ending.isCancelled,
              let request = try? Self.sessionRequest(session, base: job.spec.request, headers: session.cancelHeaders()) else {
            return
        }
        // Tells the server to drop the session; nobody waits for its answer.
        var cancel = request
        cancel.timeoutMs = min(cancel.timeoutMs, 10_000)
        try? engine.start(cancel, id: freshTransferID()) { _ in }
    }

    /// A PUT to the session's upload URL, which the server chose: it is held to the same
    /// rules as a client's URL (http or https only).
    private static func sessionRequest(_ session: ResumableUpload, base: HTTPRequest, headers: [HTTPHeader]) throws -> HTTPRequest {
        guard let url = session.uploadURL else { throw NotAllowed(detail: "the upload session has no upload URL") }
        guard let parsed = try? RequestURL(url), ["http", "https"].contains(parsed.scheme) else {
            throw NotAllowed(detail: "the server's upload URL is not an http or https URL: \(url)")
        }
        var request = base
        request.url = parsed.text
        request.method = "PUT"
        request.body = .none
        request.headers = base.headers.filter { !$0.name.caseInsensitiveEquals("content-type") } + headers
        return request
    }
}
