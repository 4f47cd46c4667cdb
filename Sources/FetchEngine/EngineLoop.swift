internal import CCurl
import FoundationEssentials
import Glibc
import Synchronization

/// An engine thread's loop (the engine runs two: one for small requests, one for bulk
/// transfers). Everything except `submit` and `activeCount` runs on its one thread, which is
/// what makes the unchecked Sendable sound; the cookie jars are shared, behind their lock.
final class EngineLoop: @unchecked Sendable {
    enum Command {
        case start(Transfer)
        case cancel(UInt64)
        case stop
        /// Reads or edits the cookie jars, between transfers' steps, so nothing races.
        case cookies(@Sendable (CookieJars) -> Void)
        /// Waits on one more descriptor beside the transfers' sockets (and what to run before
        /// each wait).
        case watch(Int32, @Sendable () -> Void, (@Sendable () -> Void)?)
        /// Unpauses a transfer its write callback paused.
        case unpause(UInt64)
        /// A finished download's blocks are all written (`lateFailure`: why one was not).
        case written(Transfer, Result<HTTPResponse, TransferError>, lateFailure: TransferError?)
        /// A streamed body's receiver has delivered every byte it took (`failure`: why not).
        case delivered(Transfer, Result<HTTPResponse, TransferError>, failure: TransferError?)
    }

    private let settings: EngineSettings
    private let multi: UnsafeMutableRawPointer
    private let commands = Locked<[Command]>([])
    let activeCount = Atomic<Int>(0)
    /// Sockets libcurl holds open (connections, in use or cached): written by the engine
    /// thread only, in C (`fetchd_counted_open`); never freed, as the engine lives until exit
    /// and a cached connection may be closed by the multi handle's cleanup.
    let openSockets: UnsafeMutablePointer<CLong> = {
        let counter = UnsafeMutablePointer<CLong>.allocate(capacity: 1)
        counter.initialize(to: 0)
        return counter
    }()
    /// Told (on an engine thread) the name of a jar a finished transfer may have changed.
    let cookieObserver: Locked<(@Sendable (String) -> Void)?>

    /// The engine thread, once it runs: commands it gives itself need no wake-up.
    private let engineThread = Atomic<UInt>(0)

    // Engine thread only.
    private var watched: (fd: Int32, onReadable: @Sendable () -> Void, beforeWait: (@Sendable () -> Void)?)?
    private var active: [UInt64: Transfer] = [:]
    /// Easy handles for the next transfers; `configured` ones still have the baseline
    /// options set (Transfer.configure).
    private var handlePool: [PooledHandle] = []
    /// The command queue's other buffer (drainCommands).
    private var spareCommands: [Command] = []
    private var stopping = false
    /// Finished downloads whose completion waits for their queued writes.
    private var writing = 0
    /// Ended transfers whose completion waits for their streamed body's delivery (a cancel
    /// or a stop abandons it).
    private var delivering: [UInt64: Transfer] = [:]
    private let jars: SharedCookieJars
    private let turns = FairTurns()
    /// When to unpause the transfers paused for their bandwidth caps.
    private let throttleTimers = ThrottleTimers()
    private let defaults: DefaultHeaders

    init(settings: EngineSettings, jars: SharedCookieJars, cookieObserver: Locked<(@Sendable (String) -> Void)?>) {
        _ = engineGlobalInit
        self.settings = settings
        self.jars = jars
        self.cookieObserver = cookieObserver
        defaults = DefaultHeaders(userAgent: settings.userAgent)
        multi = curl_multi_init()
        fetchd_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, settings.maxCachedConnections)
    }

    /// Whether the calling thread is the engine thread.
    var isCurrent: Bool { pthread_self() == engineThread.load(ordering: .relaxed) }

    func submit(_ command: Command) {
        // Only the command that finds the queue empty wakes the thread: the others are
        // drained by that same wake-up (one socketpair write serves a burst).
        let first = commands.withLock { queue -> Bool in
            queue.append(command)
            return queue.count == 1
        }
        // The engine thread drains its queue before it next waits.
        if first && pthread_self() != engineThread.load(ordering: .relaxed) { curl_multi_wakeup(multi) }
    }

    func run() {
        engineThread.store(pthread_self(), ordering: .relaxed)
        var running: Int32 = 0
        while !stopping || !active.isEmpty || writing > 0 {
            drainCommands()
            if stopping && active.isEmpty && writing == 0 { break }
            // The transfers that used up the last turn's share go on in this one.
            for id in turns.nextTurn() {
                if let easy = active[id]?.easy { fetchd_easy_unpause(easy) }
            }
            // Those whose bucket has room again go on (one still over its cap pauses again).
            for id in throttleTimers.takeDue() {
                if let easy = active[id]?.easy { fetchd_easy_unpause(easy) }
            }
            turns.alone = active.count <= 1
            curl_multi_perform(multi, &running)
            collectFinished()
            // Sleeps until a socket is ready, a curl timer is due, or submit() wakes it.
            // Idle, nothing to time: sleep long (libcurl shortens it when it has timers).
            // A transfer waiting for its next turn: only a look at the sockets, no sleep.
            var timeout: Int32 = turns.hasYielded ? 0 : active.isEmpty ? 60_000 : 1000
            // No longer than until the first transfer paused for its caps is due.
            if let next = throttleTimers.millisecondsUntilNext() { timeout = min(timeout, next) }
            if let watched {
                watched.beforeWait?()
                var extra = curl_waitfd(fd: watched.fd, events: Int16(CURL_WAIT_POLLIN), revents: 0)
                if turns.hasYielded || !spinUntilReady(&extra) { curl_multi_poll(multi, &extra, 1, timeout, nil) }
                if extra.revents & Int16(CURL_WAIT_POLLIN) != 0 { watched.onReadable() }
            } else {
                curl_multi_poll(multi, nil, 0, timeout, nil)
            }
        }
        drainCommands()  // answers cookie commands that came with or after the stop
        watched?.beforeWait?()
        for pooled in handlePool { curl_easy_cleanup(pooled.easy) }
        handlePool.removeAll()
        curl_multi_cleanup(multi)
        jars.release()
    }

    /// Polls without sleeping for up to `spinMicroseconds`; true as soon as something is
    /// ready. A request or an answer that comes within that time (the next request of a
    /// client, a response from a server on the same machine) is handled without the thread
    /// sleeping and being woken, which on a virtual machine costs tens of microseconds. It
    /// only ever runs for that long after the loop did something: an idle engine sleeps.
    private func spinUntilReady(_ extra: inout curl_waitfd) -> Bool {
        guard settings.spinMicroseconds > 0 else { return false }
        let until = Self.monotonicNanoseconds() + UInt64(settings.spinMicroseconds) * 1000
        var ready: Int32 = 0
        repeat {
            curl_multi_poll(multi, &extra, 1, 0, &ready)
            if ready > 0 { return true }
            // A poll here may have consumed a wake-up from submit(): its commands wait in
            // the queue, and the loop must not go to sleep on them.
            if commands.withLock({ !$0.isEmpty }) { return true }
        } while Self.monotonicNanoseconds() < until
        return false
    }

    private static func monotonicNanoseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
    }

    private func drainCommands() {
        // The queue and this thread's spare trade places: each keeps its buffer, so a drain
        // allocates nothing (taking a copy and emptying the queue made a new buffer each time).
        var pending = spareCommands
        spareCommands = []
        commands.withLock { swap(&$0, &pending) }
        defer {
            pending.removeAll(keepingCapacity: true)
            spareCommands = pending
        }
        for command in pending {
            switch command {
            case .start(let transfer): begin(transfer)
            case .cancel(let id): cancel(id, reason: "cancelled")
            case .stop:
                stopping = true
                for id in Array(active.keys) { cancel(id, reason: "engine stopped") }
                for transfer in delivering.values { transfer.bodyReceiver?.abandon() }
            case .cookies(let work): jars.withJars { work($0) }
            case .watch(let fd, let onReadable, let beforeWait): watched = (fd, onReadable, beforeWait)
            case .unpause(let id):
                // Gone already (cancelled, timed out): nothing to do.
                if let easy = active[id]?.easy { fetchd_easy_unpause(easy) }
            case .written(let transfer, let result, let lateFailure):
                writing -= 1
                if case .success = result, let lateFailure {
                    complete(transfer, .failure(lateFailure))
                } else {
                    complete(transfer, result)
                }
            case .delivered(let transfer, let result, let failure):
                delivered(transfer, result, failure)
            }
        }
    }

    /// A streamed body's receiver has delivered what it took: the transfer completes.
    private func delivered(_ transfer: Transfer, _ result: Result<HTTPResponse, TransferError>, _ failure: TransferError?) {
        writing -= 1
        delivering[transfer.id] = nil
        if var failure {
            if case .failure(let error) = result {
                failure.exchange = error.exchange
                failure.timings = error.timings
            }
            complete(transfer, .failure(failure))
        } else {
            complete(transfer, result)
        }
    }

    private func begin(_ transfer: Transfer) {
        assert(isCurrent, "transfers begin on the engine thread")
        if stopping {
            transfer.finish(.failure(TransferError(.cancelled, "engine stopped")))
            return
        }
        if let previous = active[transfer.id] {
            // Ids are the caller's; a clash would orphan the older one, so refuse the newer.
            _ = previous
            transfer.finish(.failure(TransferError(.other, "duplicate transfer id \(transfer.id)")))
            return
        }
        let pooled = handlePool.popLast()
        let easy = pooled?.easy ?? curl_easy_init()!
        let configured = pooled?.configured ?? false
        let id = transfer.id
        if transfer.downloadSink != nil || transfer.request.bodyBudget != nil || transfer.bodyReceiver != nil
            || transfer.streamedUpload != nil {
            transfer.resumeAfterPause = { [weak self] in self?.submit(.unpause(id)) }
        }
        transfer.turns = turns
        transfer.throttle?.timers = throttleTimers
        transfer.configure(easy, settings: settings, defaults: defaults, configured: configured)
        if !configured { fetchd_easy_count_sockets(easy, openSockets) }
        // A reused handle that has this jar already keeps it: its share and its cookie file
        // entry are set, and setting them again costs a share lock, an allocation and a list
        // entry to free.
        if !(configured && pooled?.jar == transfer.request.cookieJar) {
            if configured { CookieJars.detach(easy) }
            jars.withJars { $0.attach(easy, jar: transfer.request.cookieJar) }
        }
        active[transfer.id] = transfer
        activeCount.store(active.count, ordering: .relaxed)
        curl_multi_add_handle(multi, easy)
    }

    private func cancel(_ id: UInt64, reason: String) {
        // Ended, waiting for its streamed body to be delivered: no longer.
        if let waiting = delivering[id] {
            waiting.bodyReceiver?.abandon()
            return
        }
        guard let transfer = active[id] else { return }
        transfer.bodyReceiver?.abandon()
        transfer.downloadSink?.flush()
        end(transfer, .failure(TransferError(.cancelled, reason)))
    }

    private func collectFinished() {
        var remaining: Int32 = 0
        while let message = curl_multi_info_read(multi, &remaining) {
            guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle else { continue }
            var pointer: UnsafeMutableRawPointer? = nil
            fetchd_easy_getinfo_ptr(easy, CURLINFO_PRIVATE, &pointer)
            guard let pointer else { continue }
            let transfer = Unmanaged<Transfer>.fromOpaque(pointer).takeUnretainedValue()
            let code = fetchd_msg_result(message)
            // A download's last block is written now; what arrived before a failure is kept
            // in the part file, for a resume.
            transfer.downloadSink?.flush()
            if code == CURLE_OK && transfer.downloadSink?.failure == nil {
                end(transfer, .success(transfer.response()))
            } else if code == CURLE_OK || code == CURLE_WRITE_ERROR, let failure = transfer.downloadSink?.failure {
                let path = transfer.downloadSink?.target.partPath
                let file: String? = if case .writing = failure { path } else { nil }
                end(transfer, .failure(TransferError(.other, failure.detail, filePath: file)))
            } else if code != CURLE_OK, let failure = transfer.streamFailure {
                end(transfer, .failure(failure))
            } else if code == CURLE_WRITE_ERROR && transfer.bodyTooLarge {
                let limit = transfer.request.maxBodyBytes
                end(transfer, .failure(TransferError(.bodyTooLarge, "the body is larger than maxBodyBytes (\(limit))")))
            } else if let tooLarge = TransferError.headersTooLarge(code: code, transfer) {
                end(transfer, .failure(tooLarge))
            } else {
                end(transfer, .failure(TransferError.from(code: code, detail: transfer.errorText,
                                                              proxy: transfer.request.proxy)))
            }
        }
    }

    /// Takes the transfer out of the multi handle, reports its last progress and result,
    /// and returns its handle to the pool.
    private func end(_ transfer: Transfer, _ result: consuming Result<HTTPResponse, TransferError>) {
        assert(isCurrent, "transfers end on the engine thread")
        active[transfer.id] = nil
        activeCount.store(active.count, ordering: .relaxed)
        if transfer.throttle != nil { throttleTimers.remove(transfer.id) }
        guard let easy = transfer.easy else { return }
        curl_multi_remove_handle(multi, easy)
        if let onProgress = transfer.onProgress {
            let last = transfer.currentProgress()
            if last != transfer.lastProgress { onProgress(last) }
        }
        if let jar = transfer.request.cookieJar, CookieJars.mayHaveChanged(transfer, easy: easy) {
            let arrived = transfer.responseHeaders.compactMap { header -> String? in
                guard header.name.caseInsensitiveEquals("set-cookie") else { return nil }
                return String(header.value.prefix { $0 != "=" }).trimmingBlanks()
            }
            jars.withJars { $0.keepCreationOrder(jar, arrived: arrived) }
            notifyCookiesChanged(jar)
        }
        // Consumed: changed in place, not copied (a response is a dozen references).
        if case .failure(var error) = result {
            // What was learned before the failure, for HTTP logs.
            error.exchange = transfer.recorder?.hops ?? []
            error.timings = transfer.timings()
            result = .failure(error)
        }
        if let sink = transfer.downloadSink {
            // The download's blocks are written on its queue: its completion (and the next
            // attempt, which reads the part file's size) waits until they all are. A write
            // that fails there fails the transfer, as one on this thread did.
            let path = sink.target.partPath
            let (hops, timings) = if case .success = result { (transfer.recorder?.hops ?? [], transfer.timings()) }
                                  else { ([ExchangeHop](), TransferTimings()) }
            writing += 1
            sink.whenWritten { [self, result] failure in
                let late = failure.map { detail in
                    var error = TransferError(.other, detail, filePath: path)
                    error.exchange = hops
                    error.timings = timings
                    return error
                }
                submit(.written(transfer, result, lateFailure: late))
            }
        } else if let receiver = transfer.bodyReceiver {
            // Its completion waits until every byte taken is delivered (a descriptor's writes).
            let succeeded = if case .success = result { true } else { false }
            writing += 1
            delivering[transfer.id] = transfer
            receiver.transferEnded(succeeded: succeeded) { [self, result] failure in
                // Called here and now (notifications, nothing left to write): no trip through
                // the queue, which this thread would only drain after its next wait.
                if isCurrent { delivered(transfer, result, failure) } else { submit(.delivered(transfer, result, failure: failure)) }
            }
        } else {
            complete(transfer, result)
        }
        transfer.easy = nil
        guard handlePool.count < settings.handlePoolSize else { return curl_easy_cleanup(easy) }
        if case .success = result, transfer.leavesBaselineOnly, Self.madeNoConnection(easy) {
            // Only the options every transfer sets again differ from the baseline: the next
            // transfer takes the handle as it is, its cookie jar included.
            handlePool.append(PooledHandle(easy: easy, configured: true, jar: transfer.request.cookieJar))
        } else {
            CookieJars.reset(easy)
            handlePool.append(PooledHandle(easy: easy, configured: false, jar: nil))
        }
    }

    /// Whether the transfer ran on a connection it reused, making none. A handle that
    /// connected goes through `curl_easy_reset`: libcurl 7.88 counts a dead reused
    /// connection's retry (a fresh connect) on the handle and zeroes that count only there,
    /// and five would fail a later transfer.
    private static func madeNoConnection(_ easy: UnsafeMutableRawPointer) -> Bool {
        var connects = 0
        return fetchd_easy_getinfo_long(easy, CURLINFO_NUM_CONNECTS, &connects) == CURLE_OK && connects == 0
    }

    private func complete(_ transfer: Transfer, _ result: Result<HTTPResponse, TransferError>) {
        transfer.finish(result)
        // After the completion: an answer made there is queued by now, and one made elsewhere
        // is counted by the daemon until it is (BodyBudget.answerPending).
        transfer.request.bodyBudget?.transferEnded(transfer.id, holding: transfer.budgetHeld)
    }
}

/// A handle in the engine's pool.
private struct PooledHandle {
    let easy: UnsafeMutableRawPointer
    /// It still has the baseline options (its last transfer set nothing else).
    let configured: Bool
    /// The cookie jar it is attached to, when configured (nil: none).
    let jar: String?
}

/// curl_global_init must run once before any other libcurl call.
private let engineGlobalInit: Void = {
    curl_global_init(fetchd_global_all())
}()
