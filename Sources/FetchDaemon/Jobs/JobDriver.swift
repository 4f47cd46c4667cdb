import Dispatch
import FetchEngine
import FoundationEssentials
import JSONRPC
import Synchronization

/// Performs what a job's `JobMachine` asks for, for every kind of job (fetch, download, upload,
/// resumable upload): runs each attempt through the job's stages, hands it to the engine,
/// has the stages judge how it ended, waits between attempts, makes the answer and sends it.
///
/// Threads: a job starts on the thread that read its request, and each step continues on the
/// thread that ended the step before (the engine thread after a transfer, the admission
/// queue after a wait, the timer queue after a retry wait), so a small GET is started and
/// answered with no hop between threads. The exceptions, each asserted or stated where it
/// happens: attempts of jobs that open files are prepared on the blocking threads; answers
/// with large bodies are made on the task threads, and beside a busy engine on the answer
/// thread; answers that do file work (a download lands) on the blocking threads. The
/// machine's lock is never held while an action is performed.
struct JobDriver: Sendable {
    let jobs: JobRegistry
    var services: JobServices { jobs.services }

    /// Bodies up to this size become the answer where the job ended; larger ones in a task.
    static let inlineAnswerBodyBytes = 256 << 10
    /// With this many transfers still running beside small requests' thread, answers are made
    /// on the answer thread, where the daemon has one (`Daemon.answerThread`).
    static let handOffAnswersAboveActive = 4

    /// Registers the job and starts it; its answer goes to `reply`, exactly once, from
    /// whichever thread ends the job. Registration errors (a duplicate jobId, shutdown) are
    /// thrown here.
    func start(_ spec: JobSpec, context: RPCContext, reply: @escaping ReplyingRPCMethod.Reply) throws {
        let job = try jobs.register(spec, context: context, reply: reply)
        let comment = spec.model.comment.map { ", comment: \($0)" } ?? ""
        services.log.debug("job \(job.id) from connection \(context.connectionID): \(spec.request.method) \(spec.request.url)\(comment)")
        do {
            // The durable journal writes the job down here, before its first byte is sent.
            for observer in services.observers { try observer.jobQueued(job) }
        } catch {
            jobs.withdraw(job)
            throw error
        }
        handle(job, .begin)
    }

    /// What a durable job writes down: its params without credentials, under its jobId
    /// (one is given here when the client gave none, so the row has its key before the
    /// job is registered).
    func durableRecord(_ method: String, _ params: JSONValue?, model: inout RequestModel,
                       resuming: DurableStore.Record?) throws -> DurableStore.Record {
        let jobID = model.jobID ?? jobs.freshJobID()
        model.jobID = jobID
        var record = DurableStore.Record(jobID: jobID, method: method, params: try DurableStore.storable(params, jobID: jobID),
                                         restarts: resuming.map { $0.restarts + 1 } ?? 0, sessionURL: resuming?.sessionURL)
        if let resuming {
            record.retry = resuming.retry
            record.started = resuming.started
            record.crashes = resuming.crashes
        }
        return record
    }

    /// `start` for methods that run in a task.
    func run(_ spec: JobSpec, context: RPCContext) async throws -> JSONValue {
        try await withUnsafeThrowingContinuation { continuation in
            do {
                try start(spec, context: context) { continuation.resume(with: $0) }
            } catch {
                continuation.resume(throwing: error)
            }
        }
    }

    /// True when the cancel was taken (the job was queued, running or waiting to retry).
    func cancel(_ job: Job, by reason: CancelReason) -> Bool {
        handle(job, .cancel(reason))
    }

    /// What the step that sends an event hands to the actions it causes, on the same thread
    /// and without a trip through the job's lock: the prepared attempt, the decided outcome,
    /// the answer made.
    private enum Carried {
        case nothing
        case attempt(Attempt, prepared: Int)
        case outcome(AttemptOutcome)
        case answer(Result<JSONValue, any Error>, status: Int?)
    }

    /// Moves the job's machine, then performs what it asks for, outside its lock.
    @discardableResult
    func handle(_ job: Job, _ event: JobMachine.Event) -> Bool {
        handle(job, event, carrying: .nothing)
    }

    @discardableResult
    private func handle(_ job: Job, _ event: JobMachine.Event, carrying carried: Carried) -> Bool {
        let (actions, taken, reply) = job.transition(event, now: services.now)
        actions.forEach { perform($0, job, carried, reply) }
        return taken
    }

    private func perform(_ action: JobMachine.Action, _ job: Job, _ carried: Carried, _ reply: ReplyingRPCMethod.Reply?) {
        switch (action, carried) {
        case (.attempt, _): beginAttempt(job)
        case (.startTransfer, .attempt(let attempt, let prepared)): launch(job, attempt, prepared: prepared)
        case (.abandonAttempt, .attempt(let attempt, let prepared)): giveBack(job, attempt, prepared: prepared)
        case (.abandonAttempt, _): abandon(job)
        case (.stopWaiting, _): job.takeHold()?.cancel(JobCancelled(jobID: job.id, by: .cancel))
        case (.cancelTransfer, _): services.engine.cancel(job.transferID)
        case (.scheduleRetry(let delay, let attempt, let reason), _):
            scheduleRetry(job, delay: delay, attempt: attempt, reason: reason)
        case (.finish, .outcome(let outcome)): finish(job, outcome)
        case (.answerCancelled(let by), _): ended(job, .failure(JobCancelled(jobID: job.id, by: by)), status: nil, reply)
        case (.answer, .answer(let answer, let status)): ended(job, answer, status: status, reply)
        case (.startTransfer, _), (.finish, _), (.answer, _):
            // The machine asks for these only after the events that carry their value.
            assertionFailure("\(action) without what it needs")
        }
    }

    // MARK: an attempt through the stages

    private func beginAttempt(_ job: Job) {
        let attempt = Attempt(number: job.nextAttempt, request: job.spec.request)
        if job.spec.preparesOnWorker {
            services.blocking.execute { prepare(job, attempt, from: 0) }
        } else {
            prepare(job, attempt, from: 0)
        }
    }

    /// Runs the stages' `prepare` from `first` on; then the attempt starts, ends without the
    /// network, or waits for a stage's hold.
    private func prepare(_ job: Job, _ attempt: Attempt, from first: Int) {
        if job.spec.preparesOnWorker { services.engine.assertNotOnEngineThread() }
        let stages = job.spec.stages
        var index = first
        while index < stages.count {
            let step: Preparation
            do {
                step = try stages[index].prepare(attempt, job)
            } catch {
                return endAttempt(job, attempt, prepared: index, .failure(error))
            }
            switch step {
            case .proceed:
                index += 1
            case .answer(let outcome):
                return endAttempt(job, attempt, prepared: index + 1, outcome, from: .stage)
            case .hold(let hold):
                job.keepPending(attempt, prepared: index, hold: hold)
                // Cancelled meanwhile: the hold is never started (abandonAttempt).
                guard handle(job, .held) else { return }
                let holding = index
                // The chain checks its own contract: a hold releases its attempt exactly once.
                let once = ReleasedOnce()
                hold.start { released in
                    guard once.first() else {
                        return assertionFailure("stage \(type(of: stages[holding])) released an attempt twice")
                    }
                    self.released(job, released, holding: holding)
                }
                return
            }
        }
        handle(job, .starting, carrying: .attempt(attempt, prepared: stages.count))
    }

    /// A stage's hold ended: the attempt goes on past that stage, or ends with its error.
    private func released(_ job: Job, _ result: Result<Void, any Error>, holding: Int) {
        switch result {
        case .success:
            guard let pending = job.takePending() else { return }
            // The holding stage has prepared it now (a host slot is taken): a cancel that
            // raced the release gives it back.
            job.keepPending(pending.attempt, prepared: holding + 1)
            guard handle(job, .released), let attempt = job.takePending()?.attempt else { return }
            _ = job.takeHold()
            if let answer = job.spec.stages[holding].answerAfterHold(attempt, job) {
                return endAttempt(job, attempt, prepared: holding + 1, answer, from: .stage)
            }
            if job.spec.preparesOnWorker {
                services.blocking.execute { prepare(job, attempt, from: holding + 1) }
            } else {
                prepare(job, attempt, from: holding + 1)
            }
        case .failure(let error):
            // A cancel (answered already) or a refusal (the host's queue is full).
            guard let pending = job.takePending() else { return }
            if job.state.hasEnded {
                giveBack(job, pending.attempt, prepared: pending.prepared)
            } else {
                endAttempt(job, pending.attempt, prepared: pending.prepared, .failure(error))
            }
        }
    }

    /// The prepared attempt must not start: the stages that prepared it give back what they took.
    private func abandon(_ job: Job) {
        _ = job.takeHold()
        guard let pending = job.takePending() else { return }
        giveBack(job, pending.attempt, prepared: pending.prepared)
    }

    private func giveBack(_ job: Job, _ attempt: Attempt, prepared: Int) {
        let cancelled = AttemptOutcome.failure(JobCancelled(jobID: job.id, by: .cancel))
        for stage in job.spec.stages[0..<prepared].reversed() { stage.ended(attempt, cancelled, job) }
    }

    /// Hands the prepared attempt to the engine.
    private func launch(_ job: Job, _ attempt: Attempt, prepared: Int) {
        // Bodies kept in memory count against what the client's connection may hold.
        if case .memory = attempt.request.destination { attempt.request.bodyBudget = job.bodyBudget }
        attempt.launchedAt = services.clock.now()
        for observer in services.observers { observer.attemptStarted(attempt, job) }
        if let substitute = attempt.substitute {
            return substituted(job, attempt, prepared: prepared, substitute)
        }
        do {
            try services.engine.start(attempt.request, id: job.transferID, onProgress: progressReporter(job)) { outcome in
                endAttempt(job, attempt, prepared: prepared,
                           outcome.mapError { JobFailed(jobID: job.id, attempts: job.attempts, error: $0) }, from: .network)
            }
        } catch {
            return endAttempt(job, attempt, prepared: prepared, .failure(error))
        }
        // A cancel that came after `starting` may have reached the engine before the start:
        // the machine repeats it now. Without a cancel there is nothing to tell it.
        if job.mayHaveBeenCancelled { handle(job, .handedOver) }
    }

    /// A stage answers in the engine's place (a stub): logged and reported as a transfer.
    private func substituted(_ job: Job, _ attempt: Attempt, prepared: Int, _ substitute: Substitute) {
        let made = substitute.answer(attempt, job)
        let outcome = made.outcome
        if case .success(let response) = outcome {
            let received = Int64(response.download?.fileBytes ?? Int64(response.body.count))
            progressReporter(job)(TransferProgress(sentBytes: response.sentBytes, totalSendBytes: response.sentBytes,
                                                   receivedBytes: received, totalReceiveBytes: received))
        }
        endAttempt(job, attempt, prepared: prepared,
                   outcome.mapError { JobFailed(jobID: job.id, attempts: job.attempts, error: $0, data: made.failureData) },
                   from: .substitute)
    }

    /// Every stage that prepared the attempt hears how it ended; then they judge it, nearest
    /// the network first, until one decides, and review that decision; then the observers
    /// hear all of it (`source`: where the outcome came from; nil: the attempt never started).
    private func endAttempt(_ job: Job, _ attempt: Attempt, prepared: Int, _ outcome: AttemptOutcome,
                            from source: AttemptSource? = nil) {
        let ended = outcome
        let stages = job.spec.stages[0..<prepared]
        for stage in stages.reversed() { stage.ended(attempt, outcome, job) }
        var decision = JobMachine.Decision.final
        var outcome = outcome
        judging: for stage in stages.reversed() {
            switch stage.judge(attempt, outcome, job) {
            case .pass: continue
            case .final: break judging
            case .fail(let error):
                outcome = .failure(error)
                break judging
            case .again(let delay, let reason):
                decision = .again(delay: delay, reason: reason)
                break judging
            case .next:
                decision = .next
                break judging
            case .follow:
                decision = .follow
                break judging
            }
        }
        for stage in stages.reversed() { stage.review(attempt, &decision, &outcome, job) }
        for observer in services.observers { observer.attemptEnded(attempt, ended, from: source, then: decision, job) }
        handle(job, .attemptEnded(decision), carrying: .outcome(outcome))
    }

    private func scheduleRetry(_ job: Job, delay: Double, attempt: Int, reason: String) {
        for observer in services.observers { observer.retrying(job, delay: delay, attempt: attempt, reason: reason) }
        let watchers = job.watchers
        if job.spec.model.progress || !watchers.isEmpty {
            let params: JSONValue = [
                "jobId": .string(job.id), "attempt": JSONValue(attempt),
                "delayMs": JSONValue(Int((delay * 1000).rounded())), "reason": .string(reason),
            ]
            if job.spec.model.progress { job.context.notify("retrying", params) }
            for watcher in watchers { watcher.notify("retrying", params) }
        }
        services.timers.asyncAfter(deadline: .now() + .nanoseconds(Int((delay * 1e9).rounded(.up)))) {
            handle(job, .retryTimerFired)
        }
    }

    private func progressReporter(_ job: Job) -> @Sendable (TransferProgress) -> Void {
        let notifies = job.spec.model.progress
        return { progress in
            let watchers = job.record(progress)
            guard notifies || !watchers.isEmpty else { return }
            let params = ResponseFields.progress(jobID: job.id, progress)
            if notifies { job.context.notify("progress", params) }
            for watcher in watchers { watcher.notify("progress", params) }
        }
    }

    // MARK: the answer

    /// Makes the answer of the decided outcome (see the type's comment for where).
    private func finish(_ job: Job, _ outcome: AttemptOutcome) {
        guard case .success(let response) = outcome else {
            return answered(job, .failure(outcome.failureValue!), status: nil)
        }
        guard let delivery = job.spec.delivery else { return makeAnswer(job, response) }
        // A streamed body: what did not stream (a stub's, a body kept in memory) goes first.
        delivery.deliverRest(response, job) { failure in
            if let failure { answered(job, .failure(failure), status: nil) } else { makeAnswer(job, response) }
        }
    }

    private func makeAnswer(_ job: Job, _ response: HTTPResponse) {
        let threads: WorkerThreads
        if job.spec.answer.blocking {
            threads = services.blocking
        } else if response.body.count > Self.inlineAnswerBodyBytes {
            threads = services.tasks
        } else if let answers = services.answers, services.engine.activeSmallTransfers >= Self.handOffAnswersAboveActive {
            threads = answers
        } else {
            return answered(job, Result { try job.spec.answer.make(job, response) }, status: response.status)
        }
        // Made on another thread: the body counts against the client's budget until the
        // answer is queued.
        let pending = response.body.count
        job.bodyBudget?.answerPending(pending)
        threads.execute {
            answered(job, Result { try job.spec.answer.make(job, response) }, status: response.status)
            job.bodyBudget?.answerQueued(pending)
        }
    }

    /// `status`: the final response's, when the answer is made from one.
    private func answered(_ job: Job, _ answer: Result<JSONValue, any Error>, status: Int?) {
        let succeeded = if case .success = answer { true } else { false }
        handle(job, .resultMade(succeeded: succeeded), carrying: .answer(answer, status: status))
    }

    /// The job is over: unregistered, logged, and answered, once (the machine hands out the
    /// reply with the one transition that answers).
    private func ended(_ job: Job, _ own: Result<JSONValue, any Error>, status: Int?, _ reply: ReplyingRPCMethod.Reply?) {
        guard let reply else { return }
        // A job whose attempts are prepared on the blocking threads ends there too: its stages'
        // `jobEnded` do file work (a download's empty part file is removed), never on an
        // engine thread, and before the answer goes.
        if job.spec.preparesOnWorker && services.engine.isEngineThread {
            return services.blocking.execute { ended(job, own, status: status, reply) }
        }
        // What the job's own request alone is told (a helper's stderr line) stays out of
        // what everyone else sees: getJob, attach, HTTP logs.
        var answer = own
        if case .failure(let error as any RequesterOnlyDetail) = own { answer = .failure(error.withoutRequesterDetail) }
        let ending: JobEnding
        switch answer {
        case .success: ending = .finished(status: status ?? 0, landed: job.spec.kind == .download ? job.landed : nil)
        case .failure(let cancelled as JobCancelled): ending = .cancelled(cancelled.by)
        case .failure(let error): ending = .failed(error)
        }
        for stage in job.spec.stages { stage.jobEnded(job, ending) }
        jobs.finish(job, answer: answer)
        for observer in services.observers { observer.jobEnded(job, ending) }
        services.log.debug("job \(job.id): \(HARBuilder.JobOutcome(ending).text) after \(job.attempts) attempt(s), \(job.elapsed) s")
        reply(own)
        // Attached after the job left the registry is impossible: the registry attaches
        // only live jobs, under its lock, and `finish` above took the job out.
        for attached in job.takeAttached() { attached.reply(answer) }
    }
}

/// An error with a part that only the request that caused it is told (a helper's stderr
/// line): everyone else (getJob, attach, HTTP logs) sees it without.
protocol RequesterOnlyDetail: Error {
    var withoutRequesterDetail: any Error { get }
}

extension Result {
    /// The error, or nil on success.
    var failureValue: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}

/// Whether a hold's release is its first (a stage must release an attempt exactly once).
private final class ReleasedOnce: Sendable {
    private let released = Atomic<Bool>(false)

    func first() -> Bool {
        released.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
    }
}
