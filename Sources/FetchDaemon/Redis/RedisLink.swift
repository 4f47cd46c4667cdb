import Dispatch
import FetchEngine
import Glibc

/// A Lua script run with EVALSHA: loaded (SCRIPT LOAD) on every connection, and again when
/// Redis answers NOSCRIPT (its script cache was flushed, or a replica took over).
struct RedisScript: Sendable {
    let name: String
    let source: String
}

/// The daemon's link to Redis (`--redis`): two threads of its own, never the engine thread.
///
/// - `fetchd-redis` runs calls: everything handed over while it was busy goes out in one
///   pipelined write, so each call is one round trip whatever the load. While the connection
///   is down, calls fail at once (`RedisUnavailable`), and the thread reconnects with backoff
///   (0.1 s doubling to 2 s, back to 0.1 s once a call has succeeded). A reply slower than
///   `timeout` counts as Redis down, and so does a server that cannot run the scripts: a
///   replica (refused when connecting, by `ROLE`: after a failover the old primary may come
///   back as one), or any error a script answers (`READONLY`, `LOADING`, `MASTERDOWN`, a
///   cluster's `MOVED`...), which drops the connection.
/// - `fetchd-redis-sub` holds a SUBSCRIBE on `channel` and hands each message over.
///
/// `stateChanged(up)` is called when the command connection comes up or goes down;
/// `subscribed` each time the subscription is (re)made (messages may have been missed).
final class RedisLink: Sendable {
    typealias Done = @Sendable (Result<RedisReply, RedisUnavailable>) -> Void

    private struct Call {
        let script: RedisScript
        let keys: [String]
        let arguments: [String]
        let done: Done
    }

    private struct State {
        var calls: [Call] = []
        var up = false
        var lastError = ""
        /// The subscriber lost its connection: check the command connection too.
        var probe = false
        var stopping = false
    }

    let url: RedisURL
    let channel: String
    private let timeout: Double
    private let state = Locked(State())
    private let wakeup = DispatchSemaphore(value: 0)
    private let log: Logger
    private let stateChanged: @Sendable (Bool) -> Void

    init(url: RedisURL, channel: String, timeout: Double = 1.0, log: Logger,
         stateChanged: @escaping @Sendable (Bool) -> Void,
         subscribed: @escaping @Sendable () -> Void,
         message: @escaping @Sendable (String) -> Void) {
        self.url = url
        self.channel = channel
        self.timeout = timeout
        self.log = log
        self.stateChanged = stateChanged
        let firstAttempt = DispatchSemaphore(value: 0)
        NamedThread.start("fetchd-redis") { [self] in runCalls(firstAttempt: firstAttempt) }
        NamedThread.start("fetchd-redis-sub") { [self] in runSubscriber(subscribed: subscribed, message: message) }
        // The daemon starts serving once the first connect has succeeded or failed, so its
        // first requests see Redis as it is.
        _ = firstAttempt.wait(timeout: .now() + timeout + 0.5)
    }

    var isUp: Bool { state.withLock { $0.up } }

    /// Runs `script` with EVALSHA; `done` is called once, on the link's thread.
    func eval(_ script: RedisScript, keys: [String], arguments: [String], done: @escaping Done) {
        let fail = state.withLock { s -> Bool in
            guard s.up else { return true }
            s.calls.append(Call(script: script, keys: keys, arguments: arguments, done: done))
            return false
        }
        if fail { done(.failure(RedisUnavailable(description: "Redis is down"))) } else { wakeup.signal() }
    }

    // MARK: the command thread

    /// The command thread's own state (touched by that thread only).
    private final class CallLoop {
        var connection: RedisConnection?
        var scripts: [String: String] = [:]  // name -> sha1 on this connection
        var backoff = 0.1
        /// The connection failed: wait out the backoff before the next one (a server that
        /// answers every script with an error must not be reconnected to in a loop).
        var failed = false
        var first: DispatchSemaphore?
        init(first: DispatchSemaphore) { self.first = first }
    }

    // The loops are a step function called until it says stop (never, in practice), not a
    // `while true` around the body: Swift 6.3.1's loop-invariant code motion pass hangs on
    // such an infinite loop in an optimized build (swiftlang/swift#88618).
    private func runCalls(firstAttempt: DispatchSemaphore) {
        let loop = CallLoop(first: firstAttempt)
        while callStep(loop) {}
    }

    @inline(never)
    private func callStep(_ loop: CallLoop) -> Bool {
        if loop.connection == nil {
            if loop.failed {
                loop.failed = false
                _ = wakeup.wait(timeout: .now() + loop.backoff)
                loop.backoff = min(loop.backoff * 2, 2.0)
            }
            do {
                let made = try RedisConnection(url, timeout: timeout, readTimeout: true)
                try Self.checkPrimary(made, url: url)
                loop.connection = made
                loop.scripts = [:]
                state.withLock { $0.up = true }
                log.info("redis \(url): connected")
                stateChanged(true)
            } catch {
                let report = state.withLock { s -> Bool in
                    defer { s.lastError = error.description }
                    return s.lastError != error.description
                }
                if report { log.error("redis: \(error.description)") }
            }
            loop.first?.signal()
            loop.first = nil
            if loop.connection == nil {
                _ = wakeup.wait(timeout: .now() + loop.backoff)
                loop.backoff = min(loop.backoff * 2, 2.0)
                return !stopping
            }
        }
        wakeup.wait()
        let (calls, probe) = state.withLock { s -> ([Call], Bool) in
            defer { s.calls = []; s.probe = false }
            return (s.calls, s.probe)
        }
        guard let live = loop.connection else { return !stopping }
        do {
            if probe { _ = try live.command(["PING"]) }
            if !calls.isEmpty {
                try run(calls, on: live, scripts: &loop.scripts)
                loop.backoff = 0.1
                state.withLock { $0.lastError = "" }
            }
        } catch {
            loop.connection = nil
            loop.failed = true
            goDown(error, failing: calls)
        }
        return !stopping
    }

    /// Shared limits write: a replica (`ROLE` answers `slave`) is refused like a server that
    /// cannot be reached, until it is promoted. A user not allowed `ROLE` is taken at its word.
    private static func checkPrimary(_ connection: RedisConnection, url: RedisURL) throws(RedisUnavailable) {
        guard case .array(let parts) = try connection.command(["ROLE"]), let role = parts.first?.text, role != "master" else { return }
        throw RedisUnavailable(description: "\(url) is a \(role == "slave" ? "replica" : role), not a primary: shared limits need one that takes writes")
    }

    /// Never set: the link lives as long as the daemon. The loops test it so that they are
    /// not infinite loops to the optimizer.
    private var stopping: Bool { state.withLock { $0.stopping } }

    /// One pipelined write of every call, then every reply; a NOSCRIPT loads the script again.
    private func run(_ calls: [Call], on live: RedisConnection, scripts: inout [String: String]) throws(RedisUnavailable) {
        for call in calls where scripts[call.script.name] == nil {
            scripts[call.script.name] = try load(call.script, on: live)
        }
        func command(_ call: Call) -> [String] {
            ["EVALSHA", scripts[call.script.name] ?? "", String(call.keys.count)] + call.keys + call.arguments
        }
        var replies = try live.pipeline(calls.map(command))
        for (index, reply) in replies.enumerated() {
            guard case .error(let message) = reply, message.hasPrefix("NOSCRIPT") else { continue }
            scripts[calls[index].script.name] = try load(calls[index].script, on: live)
            replies[index] = try live.command(command(calls[index]))
        }
        // Any other error is the server's state, not the call's (the scripts and their
        // arguments are the daemon's own): a replica since a failover (READONLY), a server
        // still loading its data, a cluster whose slot moved. Asked again at once, it would
        // answer the same: the link goes down and tries again with backoff.
        for (call, reply) in zip(calls, replies) {
            if case .error(let message) = reply {
                throw RedisUnavailable(description: "Redis answered the \(call.script.name) script with \(message)")
            }
        }
        for (call, reply) in zip(calls, replies) { call.done(.success(reply)) }
    }

    private func load(_ script: RedisScript, on connection: RedisConnection) throws(RedisUnavailable) -> String {
        let reply = try connection.command(["SCRIPT", "LOAD", script.source])
        guard let sha = reply.text else {
            throw RedisUnavailable(description: "SCRIPT LOAD \(script.name) failed: \(reply)")
        }
        return sha
    }

    private func goDown(_ error: RedisUnavailable, failing calls: [Call]) {
        let (queued, report) = state.withLock { s -> ([Call], Bool) in
            s.up = false
            // The same failure again before any call succeeded: said once.
            let report = s.lastError != error.description
            s.lastError = error.description
            defer { s.calls = [] }
            return (s.calls, report)
        }
        if report { log.error("redis \(url): \(error.description); shared limits fall back until it is back") }
        stateChanged(false)
        for call in calls + queued { call.done(.failure(error)) }
    }

    // MARK: the subscriber thread

    private func runSubscriber(subscribed: @Sendable () -> Void, message: @Sendable (String) -> Void) {
        var backoff = 0.1
        while subscribeStep(backoff: &backoff, subscribed: subscribed, message: message) {}
    }

    /// Subscribes and hands messages over until the connection fails, then waits out the backoff.
    @inline(never)
    private func subscribeStep(backoff: inout Double, subscribed: @Sendable () -> Void,
                               message: @Sendable (String) -> Void) -> Bool {
        do {
            let connection = try RedisConnection(url, timeout: timeout, readTimeout: false)
            _ = try connection.command(["SUBSCRIBE", channel])
            backoff = 0.1
            subscribed()
            repeat {
                let reply = try connection.readReply()
                if let parts = reply.array, parts.count == 3, parts[0].text == "message", let text = parts[2].text {
                    message(text)
                }
            } while !stopping
        } catch {
            state.withLock { $0.probe = true }
            wakeup.signal()
            usleep(UInt32(backoff * 1e6))
            backoff = min(backoff * 2, 2.0)
        }
        return !stopping
    }
}
