/// A job's whole life as one state and one transition function, as curl's multi.c moves every
/// transfer through one enum and async-http-client's RequestBag returns actions: `handle`
/// takes an event and the clock and returns what the driver (`JobDriver`) must do. No I/O,
/// no locks, no threads: the driver holds it under the job's lock and performs the actions
/// after letting go of it.
///
/// ```
///            begin / retryTimerFired / next / follow
///   queued ─────────────► (attempt: the stages prepare it) ──held──► waitingForHost
///     ▲                       │ starting                              │ released
///     │                       ▼                                       ▼
///     │   again(delay)     running ◄───────────────────────────── (back to the attempt)
///   waitingToRetry ◄───────── │ attemptEnded(final)
///                             ▼
///                         finishing ──resultMade──► finished | failed
///
///   cancel: queued, waitingForHost, waitingToRetry ─► cancelled (answered at once)
///           running ─► cancelling ─(the transfer ends)─► cancelled
///           finishing and the ends: too late (the cancel answers false)
/// ```
struct JobMachine: Sendable, Equatable {
    enum State: Equatable, Sendable {
        /// Its next attempt is being prepared (or about to be).
        case queued
        /// A stage holds the attempt: the host's limits (or, later, a credential fetch).
        case waitingForHost
        /// An attempt is on the network.
        case running
        /// A cancel came while running: waiting for the transfer to stop.
        case cancelling(CancelReason)
        /// Until `until` on the driver's clock.
        case waitingToRetry(until: Double)
        /// The outcome is decided and the result is being made (a download landing).
        case finishing
        case finished, failed
        case cancelled(CancelReason)

        /// The name listJobs and the logs show.
        var name: String {
            switch self {
            case .queued: "queued"
            case .waitingForHost: "waitingForHost"
            case .running: "running"
            case .cancelling: "cancelling"
            case .waitingToRetry: "waitingToRetry"
            case .finishing: "finishing"
            case .finished: "finished"
            case .failed: "failed"
            case .cancelled: "cancelled"
            }
        }

        /// The version 1 contract's three states (listJobs `state`, getStatus counts).
        var contractName: String {
            switch self {
            case .queued, .waitingForHost: "queued"
            case .waitingToRetry: "waiting"
            default: "running"
            }
        }

        var hasEnded: Bool {
            switch self {
            case .finished, .failed, .cancelled: true
            default: false
            }
        }
    }

    enum Event: Equatable, Sendable {
        /// The driver starts the job.
        case begin
        /// A stage holds the attempt until it is released.
        case held
        case released
        /// The prepared attempt is about to be handed to the engine.
        case starting
        /// The engine has it (a cancel that raced the hand-over is repeated now).
        case handedOver
        /// The stages judged the attempt: another one after `delay` seconds, or this is the
        /// outcome. An attempt that failed before it started (a file that can't be opened)
        /// ends the same way.
        case attemptEnded(Decision)
        case retryTimerFired
        case cancel(CancelReason)
        /// The result (or the error) of a decided outcome is made.
        case resultMade(succeeded: Bool)
    }

    enum Decision: Equatable, Sendable {
        /// A retry, after `delay` seconds (announced to the client, even when 0).
        case again(delay: Double, reason: String)
        /// The job's next step at once: a resumable upload's next chunk, a download that
        /// starts over after a 416. Not a retry.
        case next
        /// A redirect the daemon follows: the next step goes to the hop at once, as the same
        /// attempt (not counted again).
        case follow
        case final
    }

    enum Action: Equatable, Sendable {
        /// Prepare the next attempt through the stages, then start it.
        case attempt
        /// Hand the prepared attempt to the engine.
        case startTransfer
        /// The prepared attempt must not start (cancelled meanwhile): undo what the stages did.
        case abandonAttempt
        /// Take the attempt out of the stage that holds it.
        case stopWaiting
        case cancelTransfer
        /// Fire `retryTimerFired` after `delay` seconds (and tell the client, if it asked).
        case scheduleRetry(delay: Double, attempt: Int, reason: String)
        /// Make the result of the decided outcome.
        case finish
        /// Answer the job's request with -32002.
        case answerCancelled(CancelReason)
        /// Answer the job's request with the result made.
        case answer
    }

    /// At most two actions per transition, kept inline: a transition allocates nothing.
    struct Actions: Equatable, Sendable {
        let first: Action?
        let second: Action?

        init(_ first: Action? = nil, _ second: Action? = nil) {
            self.first = first
            self.second = second
        }

        static let none = Actions()

        @inline(__always)
        func forEach(_ body: (Action) -> Void) {
            if let first { body(first) }
            if let second { body(second) }
        }

        var list: [Action] { [first, second].compactMap { $0 } }
        var isEmpty: Bool { first == nil }

        /// Whether one of them answers the job.
        var answers: Bool { Self.answers(first) || Self.answers(second) }

        private static func answers(_ action: Action?) -> Bool {
            switch action {
            case .answer?, .answerCancelled?: true
            default: false
            }
        }
    }

    private(set) var state = State.queued
    /// Attempts handed to the engine so far (a resumed durable job's count goes on from
    /// what its daemon before wrote down).
    private(set) var attempts: Int
    /// The next start is a redirect hop of the attempt that started last (`follow`).
    private var hopNext = false

    init(attempts: Int = 0) {
        self.attempts = attempts
    }

    /// The number of the attempt the next step belongs to: a redirect hop is a step of the
    /// attempt before it (unless none started yet).
    var nextAttempt: Int { hopNext && attempts > 0 ? attempts : attempts + 1 }

    /// Moves the machine; returns the actions to perform, in order, and whether the event was
    /// taken (a cancel answers `cancelled: true` exactly when it is).
    mutating func handle(_ event: Event, now: @autoclosure () -> Double) -> (actions: Actions, taken: Bool) {
        switch (state, event) {
        case (.queued, .begin), (.waitingToRetry, .retryTimerFired):
            state = .queued
            return (Actions(.attempt), true)

        case (.queued, .held):
            state = .waitingForHost
            return (.none, true)
        case (.waitingForHost, .released):
            state = .queued
            return (.none, true)

        case (.queued, .starting):
            state = .running
            // A hop is the same attempt, unless none started before it (a stored redirect).
            if !hopNext || attempts == 0 { attempts += 1 }
            hopNext = false
            return (Actions(.startTransfer), true)
        case (.cancelled, .starting), (.cancelled, .released):
            // Cancelled while the stages prepared it, or as the host let it go.
            return (Actions(.abandonAttempt), false)
        case (.cancelled, .held):
            return (Actions(.abandonAttempt), false)
        case (.running, .handedOver):
            return (.none, true)
        case (.cancelling, .handedOver):
            return (Actions(.cancelTransfer), true)

        case (.running, .attemptEnded(.next)):
            state = .queued
            hopNext = false
            return (Actions(.attempt), true)
        case (.running, .attemptEnded(.follow)), (.queued, .attemptEnded(.follow)):
            // (queued: a stored redirect answered the step without the network)
            state = .queued
            hopNext = true
            return (Actions(.attempt), true)
        case (.running, .attemptEnded(.again(let delay, let reason))), (.queued, .attemptEnded(.again(let delay, let reason))):
            state = .waitingToRetry(until: now() + delay)
            hopNext = false
            return (Actions(.scheduleRetry(delay: delay, attempt: attempts + 1, reason: reason)), true)
        case (.running, .attemptEnded(.final)), (.queued, .attemptEnded(.final)), (.waitingForHost, .attemptEnded(.final)):
            // (held: the queue refused it)
            state = .finishing
            return (Actions(.finish), true)
        case (.cancelling(let by), .attemptEnded):
            state = .cancelled(by)
            return (Actions(.answerCancelled(by)), true)

        case (.finishing, .resultMade(let succeeded)):
            state = succeeded ? .finished : .failed
            return (Actions(.answer), true)

        case (.queued, .cancel(let by)), (.waitingToRetry, .cancel(let by)):
            state = .cancelled(by)
            return (Actions(.answerCancelled(by)), true)
        case (.waitingForHost, .cancel(let by)):
            state = .cancelled(by)
            return (Actions(.stopWaiting, .answerCancelled(by)), true)
        case (.running, .cancel(let by)):
            state = .cancelling(by)
            return (Actions(.cancelTransfer), true)

        default:
            // Too late (finishing, ended, a second cancel), or stale (a retry timer or a
            // stage's release after a cancel): nothing to do.
            return (.none, false)
        }
    }
}
