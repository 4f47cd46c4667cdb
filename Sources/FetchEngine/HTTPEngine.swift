internal import CCurl
import Dispatch
import FoundationEssentials
import Glibc
import Synchronization

/// The HTTP engine: one thread that owns a libcurl multi handle. Transfers are handed to it
/// from any thread and awaited with async/await; connections, DNS and TLS sessions are
/// reused across every transfer it runs.
public final class HTTPEngine: Sendable {
    let loop: EngineLoop
    /// Every download's hash runs on its own serial queue, and all of those on this one: at
    /// most one core hashes, however many downloads run, so the engine thread (and every
    /// small request it serves) keeps the other. One core hashes at about 2 GB/s here.
    private let hashing = DispatchQueue(label: "fetchd.sha256")

    public init(settings: EngineSettings = EngineSettings()) {
        loop = EngineLoop(settings: settings)
        let loop = self.loop
        NamedThread.start("fetchd-engine") { loop.run() }
    }

    /// Thread rules, checked in debug builds (as swift-nio's preconditionInEventLoop): what
    /// may wait (a file's open, a hash, a lock held across I/O) never runs on the engine
    /// thread; what touches libcurl's handles runs only there.
    public func assertNotOnEngineThread(file: StaticString = #fileID, line: UInt = #line) {
        assert(!loop.isCurrent, "this must not run on the engine thread", file: file, line: line)
    }

    /// Whether the caller is the engine thread (work that may wait then goes elsewhere).
    public var isEngineThread: Bool { loop.isCurrent }

    public func assertOnEngineThread(file: StaticString = #fileID, line: UInt = #line) {
        assert(loop.isCurrent, "this must run on the engine thread", file: file, line: line)
    }

    /// libcurl's version text, for `--version` and `getStatus`.
    public static var curlVersion: String { String(cString: curl_version()) }

    /// Queues a transfer. `completion` is called exactly once, on the engine thread: with
    /// the response, or with why there is none (`cancelled` after `cancel(id)`).
    /// A body file that cannot be opened throws here, before anything is sent.
    public func start(
        _ request: HTTPRequest, id: UInt64,
        onProgress: (@Sendable (TransferProgress) -> Void)? = nil,
        completion: @escaping @Sendable (Result<HTTPResponse, TransferError>) -> Void
    ) throws(TransferFileError) {
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
                loop.submit(.start(transfer))
            } catch {
                continuation.resume(throwing: error)
            }
        }
    }

    /// Opens the files a transfer needs on the caller's thread, so that a file that cannot
    /// be used fails before anything is sent and the engine thread never waits on open().
    private func makeTransfer(
        _ request: HTTPRequest, id: UInt64, onProgress: (@Sendable (TransferProgress) -> Void)?,
        completion: @escaping @Sendable (Result<HTTPResponse, TransferError>) -> Void
    ) throws(TransferFileError) -> Transfer {
        let upload = try UploadFile(for: request.body)
        var mimeFiles: [UploadFile] = []
        if case .multipart(let form) = request.body {
            for path in form.filePaths { mimeFiles.append(try UploadFile(path: path, offset: 0, length: nil)) }
        }
        var sink: DownloadSink? = nil
        if case .file(let target) = request.destination {
            sink = try DownloadSink(target: target, hashQueue: DispatchQueue(label: "fetchd.sha256.download", target: hashing))
        }
        return Transfer(id: id, request: request, uploadFile: upload, mimeFiles: mimeFiles, downloadSink: sink,
                        onProgress: onProgress, completion: completion)
    }

    /// Waits on `fd` together with the transfers' sockets and calls `onReadable` on the
    /// engine thread whenever it is readable, so another event source (an epoll set) can be
    /// served by this thread with no hop between threads. `onReadable` must not block; what
    /// it starts with `start` begins without a wake-up.
    public func watch(_ fd: Int32, onReadable: @escaping @Sendable () -> Void) {
        loop.submit(.watch(fd, onReadable))
    }

    /// Stops a queued or running transfer at once; its completion gets `.cancelled`.
    /// Unknown or finished ids are ignored.
    public func cancel(_ id: UInt64) {
        loop.submit(.cancel(id))
    }

    /// Number of transfers in the multi handle right now.
    public var activeTransfers: Int { loop.activeCount.load(ordering: .relaxed) }

    /// Connections libcurl holds open right now, in use or cached for reuse.
    public var openConnections: Int { fetchd_counter_load(loop.openSockets) }

    /// Cancels everything still running and stops the thread.
    public func shutdown() {
        loop.submit(.stop)
    }
}

