import CHiredis
import FetchEngine
import Glibc

/// A Redis reply, copied out of hiredis's.
enum RedisReply: Sendable, Equatable {
    case string(String)
    case status(String)
    case error(String)
    case integer(Int)
    case array([RedisReply])
    case null

    var integer: Int? { if case .integer(let n) = self { return n }; return nil }
    var text: String? {
        switch self {
        case .string(let s), .status(let s): return s
        default: return nil
        }
    }
    var array: [RedisReply]? { if case .array(let a) = self { return a }; return nil }
}

/// Why a call to Redis did not get an answer: the connection failed, timed out or is not
/// made yet. Whatever it did in Redis is unknown.
struct RedisUnavailable: Error, Sendable, CustomStringConvertible {
    let description: String
}

/// One blocking hiredis connection (`redisContext`), used by one thread only: the link's
/// command thread or its subscriber thread (asserted in debug builds). Never on the engine
/// thread.
final class RedisConnection {
    private let context: UnsafeMutablePointer<redisContext>
    private let thread = OneThread()

    /// Connects, authenticates and selects the database; `timeout` bounds the connect and,
    /// when `readTimeout` is true, every reply.
    init(_ url: RedisURL, timeout: Double, readTimeout: Bool) throws(RedisUnavailable) {
        let tv = timeval(tv_sec: Int(timeout), tv_usec: Int((timeout - timeout.rounded(.down)) * 1e6))
        let made: UnsafeMutablePointer<redisContext>?
        switch url.endpoint {
        case .tcp(let host, let port): made = redisConnectWithTimeout(host, Int32(port), tv)
        case .unix(let path): made = redisConnectUnixWithTimeout(path, tv)
        }
        guard let made else { throw RedisUnavailable(description: "cannot allocate a Redis connection") }
        context = made
        if made.pointee.err != 0 {
            // Not freed here: a class whose init throws once it is whole runs its deinit.
            let reason = Self.errorText(made)
            throw RedisUnavailable(description: "cannot connect to \(url): \(reason)")
        }
        if case .tcp = url.endpoint { _ = redisEnableKeepAlive(made) }
        _ = redisSetTimeout(made, tv)  // the setup below is bounded either way
        if let auth = url.authCommand, case .error(let message) = try command(auth) {
            // Redis's own words (WRONGPASS...) name neither the user nor the password.
            let who = url.user.map { "user \($0) and its password" } ?? "the password"
            throw RedisUnavailable(description: "Redis refused \(who): \(message)")
        }
        if url.database != 0, case .error(let message) = try command(["SELECT", String(url.database)]) {
            throw RedisUnavailable(description: "Redis refused database \(url.database): \(message)")
        }
        // A stopped (SIGSTOP) or stalled server still accepts TCP connections into its
        // backlog: only an answer shows it is there.
        guard case .status("PONG") = try command(["PING"]) else {
            throw RedisUnavailable(description: "Redis did not answer PING")
        }
        if !readTimeout { _ = redisSetTimeout(made, timeval(tv_sec: 0, tv_usec: 0)) }
    }

    deinit { redisFree(context) }

    /// One command, one round trip.
    func command(_ arguments: [String]) throws(RedisUnavailable) -> RedisReply {
        try pipeline([arguments])[0]
    }

    /// Several commands in one round trip: all are written, then every reply is read.
    func pipeline(_ commands: [[String]]) throws(RedisUnavailable) -> [RedisReply] {
        HTTPEngine.assertNotOnAnEngineThread()
        assert(thread.isOwner, "a Redis connection is one thread's")
        for arguments in commands {
            let status = Self.withArgv(arguments) { argc, argv, lengths in
                redisAppendCommandArgv(context, argc, argv, lengths)
            }
            guard status == REDIS_OK else { throw RedisUnavailable(description: Self.errorText(context)) }
        }
        var replies: [RedisReply] = []
        replies.reserveCapacity(commands.count)
        for _ in commands { replies.append(try readReply()) }
        return replies
    }

    /// The next reply (a pub/sub message on a subscribed connection); blocks.
    func readReply() throws(RedisUnavailable) -> RedisReply {
        var raw: UnsafeMutableRawPointer? = nil
        guard redisGetReply(context, &raw) == REDIS_OK, let raw else {
            throw RedisUnavailable(description: Self.errorText(context))
        }
        defer { freeReplyObject(raw) }
        return Self.copy(raw.assumingMemoryBound(to: redisReply.self))
    }

    private static func copy(_ reply: UnsafeMutablePointer<redisReply>) -> RedisReply {
        let r = reply.pointee
        func text() -> String {
            guard let str = r.str else { return "" }
            return str.withMemoryRebound(to: UInt8.self, capacity: Int(r.len)) {
                String(decoding: UnsafeBufferPointer(start: $0, count: Int(r.len)), as: UTF8.self)
            }
        }
        switch Int32(r.type) {
        case REDIS_REPLY_STRING: return .string(text())
        case REDIS_REPLY_STATUS: return .status(text())
        case REDIS_REPLY_ERROR: return .error(text())
        case REDIS_REPLY_INTEGER: return .integer(Int(r.integer))
        case REDIS_REPLY_ARRAY:
            var items: [RedisReply] = []
            for index in 0..<Int(r.elements) {
                if let element = r.element[index] { items.append(copy(element)) }
            }
            return .array(items)
        default: return .null
        }
    }

    private static func errorText(_ context: UnsafeMutablePointer<redisContext>) -> String {
        withUnsafeBytes(of: context.pointee.errstr) { raw in
            let bytes = raw.bindMemory(to: UInt8.self)
            let end = bytes.firstIndex(of: 0) ?? bytes.endIndex
            let text = String(decoding: bytes[..<end], as: UTF8.self)
            return text.isEmpty ? "connection lost" : text
        }
    }

    private static func withArgv<R>(_ arguments: [String],
                                    _ body: (Int32, UnsafeMutablePointer<UnsafePointer<CChar>?>, UnsafePointer<Int>) -> R) -> R {
        let copies = arguments.map { strdup($0) }
        defer { copies.forEach { free($0) } }
        var argv = copies.map { UnsafePointer<CChar>($0) }
        let lengths = arguments.map { $0.utf8.count }
        return argv.withUnsafeMutableBufferPointer { argvBuffer in
            lengths.withUnsafeBufferPointer { body(Int32(arguments.count), argvBuffer.baseAddress!, $0.baseAddress!) }
        }
    }
}
