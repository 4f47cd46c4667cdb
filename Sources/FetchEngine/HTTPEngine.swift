internal import CCurl
internal import CLinux
import Dispatch
import FoundationEssentials
import Glibc
import Synchronization

/// The HTTP engine: threads that each own a libcurl multi handle. The small-request threads
/// (`loops`, `EngineSettings.smallRequestThreads` of them) run every request whose body is
/// in memory, each beside its share of the socket server's connections, so a request read on
/// one runs there with no hop between threads; `bulk` runs the transfers that stream a file,
/// downloads and uploads from files, so a 1 GiB download's reads never make a small request
/// wait for its turn: with four downloads on the one thread, small GETs at c=1 have a p99 of
/// 3.6-4.1 ms; with the downloads on another engine thread, 0.65-0.72 ms. Transfers are
/// handed over from any thread; each thread's connections, DNS and TLS sessions are reused
/// across the transfers it runs, and all of them use the same cookie jars.
public final class HTTPEngine: Sendable {
    /// The small-request threads; the first also runs the cookie commands.
    let loops: [EngineLoop]
    var loop: EngineLoop { loops[0] }
    let bulk: EngineLoop
    /// Every download's hash runs on its own serial queue, and all of those on this one: at
    /// most one core hashes, however many downloads run, so the engine thread (and every
    /// small request it serves) keeps the other. One core hashes 1 GiB in about 0.75 s here.
    private let hashing = DispatchQueue(label: "fetchd.sha256")

    public init(settings: EngineSettings = EngineSettings()) {
        let count = max(1, settings.smallRequestThreads)
        let jars = SharedCookieJars(users: count + 1)
        let observer = Locked<(@Sendable (String) -> Void)?>(nil)
        loops = (0..<count).map { _ in EngineLoop(settings: settings, jars: jars, cookieObserver: observer) }
        bulk = EngineLoop(settings: settings, jars: jars, cookieObserver: observer)
        for (index, loop) in loops.enumerated() {
            NamedThread.start(index == 0 ? "fetchd-engine" : "fetchd-engine\(index + 1)") {
                fetchd_mark_engine_thread()
                loop.run()
            }
        }
        let bulk = self.bulk
        NamedThread.start("fetchd-bulk") {
            fetchd_mark_engine_thread()
            bulk.run()
        }
    }

    /// How many threads run small requests (each can drive an event source: `watch`).
    public var smallRequestThreads: Int { loops.count }

    /// The small-request thread the caller runs on, if it is one.
    private var currentLoop: EngineLoop? { loops.first(where: \.isCurrent) }

    /// The thread a request runs on: bulk when it streams a file; else the small-request
    /// thread it was started on (the one that read it from its client: no hop), else the
    /// one with the fewest transfers.
    private func thread(for request: HTTPRequest) -> EngineLoop {
        if case .file = request.destination { return bulk }
        if case .stream(let receiver) = request.destination, receiver.runsOnBulkThread { return bulk }
        switch request.body {
        case .file, .fileRange: return bulk
        case .stream(let body) where body.source.runsOnBulkThread: return bulk
        case .multipart(let form) where !form.filePaths.isEmpty: return bulk
        default:
            return currentLoop ?? loops.min { $0.activeCount.load(ordering: .relaxed) < $1.activeCount.load(ordering: .relaxed) }!
        }
    }

    /// Thread rules, checked in debug builds (as swift-nio's preconditionInEventLoop): what
    /// may wait (a file's open, a hash, a lock held across I/O) never runs on the engine
    /// thread; what touches libcurl's handles runs only there.
    public func assertNotOnEngineThread(file: StaticString = #fileID, line: UInt = #line) {
        assert(!isEngineThread, "this must not run on an engine thread", file: file, line: line)
    }

    /// Whether the caller is one of the engine threads (work that may wait then goes elsewhere).
    public var isEngineThread: Bool { currentLoop != nil || bulk.isCurrent }

    public func assertOnEngineThread(file: StaticString = #fileID, line: UInt = #line) {
        assert(isEngineThread, "this must run on an engine thread", file: file, line: line)
    }

    /// The same rules for code that holds no engine (a part file, the cache's store, a
    /// type the engine's threads own): whether the caller is an engine thread of any engine,
    /// read from a mark each engine thread sets on itself as it starts (a thread-local).
    public static var onAnEngineThread: Bool { fetchd_is_engine_thread() != 0 }

    public static func assertNotOnAnEngineThread(file: StaticString = #fileID, line: UInt = #line) {
        assert(!onAnEngineThread, "this must not run on an engine thread", file: file, line: line)
    }

    public static func assertOnAnEngineThread(file: StaticString = #fileID, line: UInt = #line) {
        assert(onAnEngineThread, "this must run on an engine thread", file: file, line: line)
    }

    /// libcurl's version text, for `--version` and `getStatus`.
    public static var curlVersion: String { String(cString: curl_version()) }

    /// Queues a transfer. `completion` is called exactly once, on its engine thread: with
    /// the response, or with why there is none (`cancelled` after `cancel(id)`).
    /// A body file that cannot be opened throws here, before anything is sent.
    /// The request is consumed: the caller's copy moves into the transfer (one copy of its
    /// thirty fields less per request).
    public func start(
        _ request: consuming HTTPRequest, id: UInt64,
        onProgress: (@Sendable (TransferProgress) -> Void)? = nil,
        completion: @escaping @Sendable (Result<HTTPResponse, TransferError>) -> Void
    ) throws(TransferFileError) {
        let loop = thread(for: request)
        let transfer = try makeTransfer(request, id: id, onProgress: onProgress, completion: completion)
        loop.submit(.start(transfer))
    }

    /// Performs one transfer and returns its response.
    public func perform(
        _ request: HTTPRequest, id: UInt64, onProgress: (@Sendable (TransferProgress) -> Void)? = nil
    ) async throws -> HTTPResponse {
        try await withCheckedThrowingContinuation { continuation in
            do {
                let transfer = try makeTransfer(request, id: id, onProgress: onProgress) {
                    continuation.resume(with: $0.mapError { $0 as any Error })
                }
                thread(for: request).submit(.start(transfer))
            } catch {
                continuation.resume(throwing: error)
            }
        }
    }

    /// Opens the files a transfer needs on the caller's thread (TLS files are read whole), so
    /// that a file that cannot be used fails before anything is sent and the engine thread
    /// never waits on open().
    private func makeTransfer(
        _ request: consuming HTTPRequest, id: UInt64, onProgress: (@Sendable (TransferProgress) -> Void)?,
        completion: @escaping @Sendable (Result<HTTPResponse, TransferError>) -> Void
    ) throws(TransferFileError) -> Transfer {
        assert(!request.usesLocalFiles || !isEngineThread, "a transfer that opens files starts off the engine threads")
        let upload = try UploadFile(for: request.body)
        var mimeFiles: [UploadFile] = []
        if case .multipart(let form) = request.body {
            for path in form.filePaths { mimeFiles.append(try UploadFile(path: path, offset: 0, length: nil)) }
        }
        let tlsFiles = try TLSFiles(request.transportIfSet)
        var sink: DownloadSink? = nil
        if case .file(let target) = request.destination {
            sink = try DownloadSink(target: target, hashQueue: DispatchQueue(label: "fetchd.sha256.download", target: hashing))
        }
        return Transfer(id: id, request: request, uploadFile: upload, mimeFiles: mimeFiles, downloadSink: sink, tlsFiles: tlsFiles,
                        onProgress: onProgress, completion: completion)
    }

    /// Waits on `fd` together with the transfers' sockets of small-request thread `thread`
    /// (0 up to `smallRequestThreads`) and calls `onReadable` there whenever it is readable,
    /// so another event source (an epoll set) can be served by that thread with no hop
    /// between threads. `onReadable` must not block; what it starts with `start` begins on
    /// that thread without a wake-up. `beforeWait` runs on that thread each time before it
    /// waits, and before it ends: for work held back over one turn of the loop (the daemon
    /// writes the answers of a turn there, each client's in one write).
    public func watch(_ fd: Int32, onThread thread: Int = 0, onReadable: @escaping @Sendable () -> Void,
                      beforeWait: (@Sendable () -> Void)? = nil) {
        loops[thread].submit(.watch(fd, onReadable, beforeWait))
    }

    /// Stops a queued or running transfer at once; its completion gets `.cancelled`.
    /// Unknown or finished ids are ignored.
    public func cancel(_ id: UInt64) {
        // The id is on one of the threads; the others ignore it.
        for loop in loops { loop.submit(.cancel(id)) }
        bulk.submit(.cancel(id))
    }

    /// Number of transfers in the multi handles right now.
    public var activeTransfers: Int {
        loops.reduce(bulk.activeCount.load(ordering: .relaxed)) { $0 + $1.activeCount.load(ordering: .relaxed) }
    }

    /// Transfers on the caller's small-request thread right now (on any other thread: on the
    /// busiest of them): how busy that thread is, for work that would otherwise run on it.
    public var activeSmallTransfers: Int {
        if let currentLoop { return currentLoop.activeCount.load(ordering: .relaxed) }
        return loops.reduce(0) { max($0, $1.activeCount.load(ordering: .relaxed)) }
    }

    /// Connections libcurl holds open right now, in use or cached for reuse.
    public var openConnections: Int {
        loops.reduce(fetchd_counter_load(bulk.openSockets)) { $0 + fetchd_counter_load($1.openSockets) }
    }

    /// Cancels everything still running and stops the threads.
    public func shutdown() {
        for loop in loops { loop.submit(.stop) }
        bulk.submit(.stop)
    }
}

