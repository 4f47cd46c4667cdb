import FetchEngine
import FoundationEssentials

/// HTTP logs as an observer: while logging is on, each attempt asks libcurl for its hops
/// (`recordsExchange`), each attempt's exchange is kept in the job (`Job.record`: the HAR
/// file's entries, and `exchange: true`'s masks), and the job's HAR file is written when it
/// ends. An answer a stage made without the network (a cache hit) is kept as the request as
/// it would have gone and that answer.
extension HTTPLog: JobObserver {
    func attemptStarted(_ attempt: Attempt, _ job: Job) {
        // A stage or the client may have asked for the hops already (a recorded stub, `exchange`).
        if !attempt.request.recordsExchange && isEnabled { attempt.request.recordsExchange = true }
    }

    func attemptEnded(_ attempt: Attempt, _ outcome: AttemptOutcome, from source: AttemptSource?,
                      then decision: JobMachine.Decision, _ job: Job) {
        guard let source else { return }
        switch source {
        case .network, .substitute:
            guard attempt.request.recordsExchange else { return }
            let recorded: Result<HTTPResponse, TransferError>
            switch outcome {
            case .success(let response): recorded = .success(response)
            case .failure(let failed as JobFailed): recorded = .failure(failed.error)
            case .failure(let error): recorded = .failure(TransferError(.other, "\(error)"))
            }
            // When it was handed over, on the wall clock.
            let startedAt = job.clock.wall().addingTimeInterval(attempt.launchedAt - job.clock.now())
            job.record(Job.AttemptRecord(number: attempt.number, startedAt: startedAt, request: attempt.request, outcome: recorded,
                                         ruleSecrets: attempt.secrets))
        case .stage:
            guard case .success(let response) = outcome, isEnabled else { return }
            var request = attempt.request
            request.recordsExchange = true
            var answered = response
            var hop = ExchangeHop(url: request.url, method: request.method)
            hop.requestHeaders = request.headers
            hop.httpVersion = response.httpVersion
            hop.status = response.status
            hop.responseHeaders = Array(response.headers)
            answered.exchange = [hop]
            job.record(Job.AttemptRecord(number: attempt.number, startedAt: job.clock.wall(), request: request,
                                         outcome: .success(answered), ruleSecrets: attempt.secrets))
        }
    }

    func jobEnded(_ job: Job, _ ending: JobEnding) {
        jobFinished(job, outcome: HARBuilder.JobOutcome(ending))
    }
}

extension HARBuilder.JobOutcome {
    init(_ ending: JobEnding) {
        switch ending {
        case .finished: self = .succeeded
        case .cancelled(let by): self = .cancelled(by.rawValue)
        case .failed(let error): self = .failed(ErrorMapping.rpcError(for: error).message)
        }
    }
}
