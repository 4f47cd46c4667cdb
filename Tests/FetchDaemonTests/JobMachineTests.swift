@testable import FetchDaemon
import XCTest

/// Every transition of a job's life, with no I/O and an injected clock: the events a driver
/// would send, and the actions the machine asks for.
final class JobMachineTests: XCTestCase {
    private typealias M = JobMachine

    /// Sends `events` in order; returns every action asked for and whether each event was taken.
    private func run(_ events: [M.Event], from machine: M = M(), now: Double = 100) -> (M, [M.Action], [Bool]) {
        var machine = machine
        var actions: [M.Action] = []
        var taken: [Bool] = []
        for event in events {
            let (more, ok) = machine.handle(event, now: now)
            actions += more.list
            taken.append(ok)
        }
        return (machine, actions, taken)
    }

    func testASuccessfulJobWithoutWaiting() {
        let (m, actions, taken) = run([.begin, .starting, .handedOver, .attemptEnded(.final), .resultMade(succeeded: true)])
        XCTAssertEqual(actions, [.attempt, .startTransfer, .finish, .answer])
        XCTAssertEqual(taken, [true, true, true, true, true])
        XCTAssertEqual(m.state, .finished)
        XCTAssertEqual(m.attempts, 1)
    }

    func testWaitingForTheHostThenAFailure() {
        var (m, actions, _) = run([.begin, .held])
        XCTAssertEqual(m.state, .waitingForHost)
        XCTAssertEqual(m.state.contractName, "queued")
        XCTAssertEqual(m.state.name, "waitingForHost")
        (m, actions, _) = run([.released, .starting, .attemptEnded(.final), .resultMade(succeeded: false)], from: m)
        XCTAssertEqual(actions, [.startTransfer, .finish, .answer])
        XCTAssertEqual(m.state, .failed)
    }

    func testRetryWaitsOnTheClockThenAttemptsAgain() {
        var (m, actions, _) = run([.begin, .starting, .attemptEnded(.again(delay: 1.5, reason: "status 503"))], now: 10)
        XCTAssertEqual(actions.last, .scheduleRetry(delay: 1.5, attempt: 2, reason: "status 503"))
        XCTAssertEqual(m.state, .waitingToRetry(until: 11.5))
        XCTAssertEqual(m.state.contractName, "waiting")
        (m, actions, _) = run([.retryTimerFired, .starting, .attemptEnded(.final), .resultMade(succeeded: true)], from: m)
        XCTAssertEqual(actions, [.attempt, .startTransfer, .finish, .answer])
        XCTAssertEqual(m.attempts, 2)
    }

    func testAnotherAttemptAtOnceSkipsTheWait() {
        // A download whose range the server can't satisfy (416) starts over in the same job;
        // a resumable upload's next chunk is the next attempt.
        let (m, actions, _) = run([.begin, .starting, .attemptEnded(.next), .starting])
        XCTAssertEqual(actions, [.attempt, .startTransfer, .attempt, .startTransfer])
        XCTAssertEqual(m.state, .running)
        XCTAssertEqual(m.attempts, 2, "one job, two attempts")
    }

    func testARedirectTheDaemonFollowsIsTheSameAttempt() {
        // Each hop is a step through the stages, not another attempt; a retry after it is one.
        var (m, actions, _) = run([.begin, .starting, .attemptEnded(.follow), .starting, .attemptEnded(.follow), .starting])
        XCTAssertEqual(actions, [.attempt, .startTransfer, .attempt, .startTransfer, .attempt, .startTransfer])
        XCTAssertEqual(m.attempts, 1, "one attempt, three hops")
        (m, _, _) = run([.attemptEnded(.again(delay: 0, reason: "status 503")), .retryTimerFired, .starting], from: m)
        XCTAssertEqual(m.attempts, 2)
        // A stored redirect answered without the network: the hop is the first attempt.
        (m, actions, _) = run([.begin, .attemptEnded(.follow), .starting, .attemptEnded(.final)])
        XCTAssertEqual(actions, [.attempt, .attempt, .startTransfer, .finish])
        XCTAssertEqual(m.attempts, 1)
        // A hop whose step ended before it started (a credential it could not get) does not
        // make the retry after it a hop.
        (m, _, _) = run([.begin, .starting, .attemptEnded(.follow), .attemptEnded(.again(delay: 0, reason: "x")),
                         .retryTimerFired, .starting])
        XCTAssertEqual(m.attempts, 2)
    }

    func testAHoldThatRefusesTheAttempt() {
        // The host's queue is full (-32005): the attempt ends without starting.
        let (m, actions, _) = run([.begin, .held, .attemptEnded(.final), .resultMade(succeeded: false)])
        XCTAssertEqual(actions, [.attempt, .finish, .answer])
        XCTAssertEqual(m.state, .failed)
    }

    func testARetryAfterNoWaitIsStillARetry() {
        // Retry-After: 0 -> the client still hears `retrying` (delayMs 0).
        let (m, actions, _) = run([.begin, .starting, .attemptEnded(.again(delay: 0, reason: "status 503"))], now: 3)
        XCTAssertEqual(actions.last, .scheduleRetry(delay: 0, attempt: 2, reason: "status 503"))
        XCTAssertEqual(m.state, .waitingToRetry(until: 3))
    }

    func testAnAttemptThatFailsBeforeItStarts() {
        let (m, actions, _) = run([.begin, .attemptEnded(.final), .resultMade(succeeded: false)])
        XCTAssertEqual(actions, [.attempt, .finish, .answer])
        XCTAssertEqual(m.state, .failed)
        XCTAssertEqual(m.attempts, 0)
    }

    // MARK: cancels, in every state and every race

    func testCancelBeforeAdmission() {
        let (m, actions, taken) = run([.begin, .cancel(.cancel)])
        XCTAssertEqual(actions, [.attempt, .answerCancelled(.cancel)])
        XCTAssertEqual(taken.last, true)
        XCTAssertEqual(m.state, .cancelled(.cancel))
    }

    func testCancelWhileThePreparedAttemptIsAboutToStart() {
        // The stages ran on another thread; the cancel came before `starting`.
        let (m, actions, taken) = run([.begin, .cancel(.disconnect), .starting])
        XCTAssertEqual(actions, [.attempt, .answerCancelled(.disconnect), .abandonAttempt])
        XCTAssertEqual(taken, [true, true, false])
        XCTAssertEqual(m.attempts, 0, "nothing was started")
    }

    func testCancelWhileWaitingForTheHost() {
        let (m, actions, _) = run([.begin, .held, .cancel(.cancel), .released])
        XCTAssertEqual(actions, [.attempt, .stopWaiting, .answerCancelled(.cancel), .abandonAttempt],
                       "leaves the queue; a release that raced it gives the slot back")
        XCTAssertEqual(m.state, .cancelled(.cancel))
    }

    func testCancelWhileAStageIsAboutToHoldIt() {
        let (_, actions, _) = run([.begin, .cancel(.cancel), .held])
        XCTAssertEqual(actions, [.attempt, .answerCancelled(.cancel), .abandonAttempt], "the hold is never started")
    }

    func testCancelDuringTheTransfer() {
        var (m, actions, taken) = run([.begin, .starting, .handedOver, .cancel(.cancel)])
        XCTAssertEqual(actions.last, .cancelTransfer)
        XCTAssertEqual(taken.last, true)
        XCTAssertEqual(m.state, .cancelling(.cancel))
        XCTAssertEqual(m.state.contractName, "running")
        XCTAssertEqual(m.handle(.cancel(.shutdown), now: 0).taken, false, "a second cancel answers false")
        (m, actions, _) = run([.attemptEnded(.final)], from: m)
        XCTAssertEqual(actions, [.answerCancelled(.cancel)], "answered once the transfer has stopped")
        XCTAssertEqual(m.state, .cancelled(.cancel))
    }

    func testCancelThatRacesTheHandOverToTheEngine() {
        // The cancel's engine.cancel may reach the engine before the start: repeated after it.
        let (_, actions, _) = run([.begin, .starting, .cancel(.cancel), .handedOver])
        XCTAssertEqual(actions, [.attempt, .startTransfer, .cancelTransfer, .cancelTransfer])
    }

    func testCancelDuringTheRetryWait() {
        let (m, actions, taken) = run([.begin, .starting, .attemptEnded(.again(delay: 5, reason: "reset")),
                                       .cancel(.shutdown), .retryTimerFired])
        XCTAssertEqual(actions.suffix(2), [.scheduleRetry(delay: 5, attempt: 2, reason: "reset"), .answerCancelled(.shutdown)])
        XCTAssertEqual(taken.last, false, "the timer that fires later is ignored")
        XCTAssertEqual(m.state, .cancelled(.shutdown))
    }

    func testCancelAfterTheOutcomeIsDecidedIsTooLate() {
        var (m, _, taken) = run([.begin, .starting, .attemptEnded(.final), .cancel(.cancel)])
        XCTAssertEqual(taken.last, false)
        XCTAssertEqual(m.state, .finishing)
        (m, _, taken) = run([.resultMade(succeeded: true), .cancel(.cancel)], from: m)
        XCTAssertEqual(taken.last, false)
        XCTAssertEqual(m.state, .finished)
    }

    func testTheRangeRestartIsCancellableThroughout() {
        // 416 -> start over: the cancel between the two attempts is taken, once.
        let (m, actions, taken) = run([.begin, .starting, .attemptEnded(.next), .cancel(.cancel)])
        XCTAssertEqual(actions.last, .answerCancelled(.cancel))
        XCTAssertEqual(taken.last, true)
        XCTAssertEqual(m.state, .cancelled(.cancel))
    }

    func testStaleEventsChangeNothing() {
        let stale: [M.Event] = [.released, .handedOver, .retryTimerFired, .resultMade(succeeded: true)]
        for event in stale {
            var m = M()
            XCTAssertTrue(m.handle(event, now: 0).actions.isEmpty, "\(event) in queued")
            XCTAssertEqual(m.state, .queued)
        }
        var ended = run([.begin, .starting, .attemptEnded(.final), .resultMade(succeeded: true)]).0
        for event in stale + [.begin, .starting, .held, .attemptEnded(.final)] {
            XCTAssertTrue(ended.handle(event, now: 0).actions.isEmpty, "\(event) after the end")
            XCTAssertEqual(ended.state, .finished)
        }
    }

    func testStateNames() {
        let names: [(M.State, String, String)] = [
            (.queued, "queued", "queued"), (.waitingForHost, "waitingForHost", "queued"),
            (.running, "running", "running"), (.cancelling(.cancel), "cancelling", "running"),
            (.waitingToRetry(until: 1), "waitingToRetry", "waiting"), (.finishing, "finishing", "running"),
            (.finished, "finished", "running"), (.failed, "failed", "running"), (.cancelled(.cancel), "cancelled", "running"),
        ]
        for (state, name, contract) in names {
            XCTAssertEqual(state.name, name)
            XCTAssertEqual(state.contractName, contract, name)
        }
    }
}
