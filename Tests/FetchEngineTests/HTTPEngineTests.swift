import CCurl
@testable import FetchEngine
import XCTest

/// The engine's own behaviour that needs no server: failures it classifies, cancels of
/// transfers that cannot finish, and files it cannot read. Talking to real servers is in
/// the integration suite (tests/integration).
final class HTTPEngineTests: XCTestCase {
    /// Requests without a `proxy` tell libcurl "no proxy" only when the environment names
    /// none: any of the variables libcurl reads, in either case, even set empty, keeps
    /// libcurl reading the environment.
    func testAnyProxyVariableInTheEnvironmentIsSeen() {
        let saved = EngineSettings.proxyVariables.map { ($0, getenv($0).map { String(cString: $0) }) }
        defer {
            for (name, value) in saved {
                if let value { setenv(name, value, 1) } else { unsetenv(name) }
            }
        }
        for name in EngineSettings.proxyVariables { unsetenv(name) }
        XCTAssertFalse(EngineSettings.environmentNamesProxy())
        XCTAssertFalse(EngineSettings().proxyFromEnvironment)
        for name in EngineSettings.proxyVariables {
            setenv(name, name.hasPrefix("no") || name.hasPrefix("NO") ? "" : "http://127.0.0.1:1", 1)
            XCTAssertTrue(EngineSettings.environmentNamesProxy(), name)
            unsetenv(name)
        }
        XCTAssertEqual(Set(EngineSettings.proxyVariables.map { $0.lowercased() }),
                       ["http_proxy", "https_proxy", "all_proxy", "no_proxy"])
    }

    func testConnectionRefusedIsConnectKind() async {
        let engine = HTTPEngine()
        defer { engine.shutdown() }
        do {
            _ = try await engine.perform(HTTPRequest(url: "http://127.0.0.1:1/"), id: 1)
            XCTFail("expected a failure")
        } catch let error as TransferError {
            XCTAssertEqual(error.kind, .connect)
        } catch {
            XCTFail("\(error)")
        }
    }

    func testCancelStopsATransferThatWouldHang() async throws {
        // A listening socket that never answers: the transfer waits until cancelled.
        let listener = try LoopbackListener()
        let engine = HTTPEngine()
        defer { engine.shutdown() }
        let finished = expectation(description: "completion")
        let outcome = OutcomeBox()
        try engine.start(HTTPRequest(url: "http://127.0.0.1:\(listener.port)/", timeoutMs: 60_000), id: 7) { result in
            outcome.set(result)
            finished.fulfill()
        }
        engine.cancel(7)
        await fulfillment(of: [finished], timeout: 5)
        guard case .failure(let error)? = outcome.get() else { return XCTFail("expected cancelled") }
        XCTAssertEqual(error.kind, .cancelled)
        _ = listener
    }

    func testUnreadableBodyFileThrowsBeforeAnythingIsQueued() {
        let engine = HTTPEngine()
        defer { engine.shutdown() }
        let request = HTTPRequest(method: "POST", url: "http://127.0.0.1:1/", body: .file(path: "/nonexistent/file"))
        XCTAssertThrowsError(try engine.start(request, id: 1) { _ in XCTFail("must not run") }) { error in
            XCTAssertEqual((error as? TransferFileError)?.path, "/nonexistent/file")
        }
    }

    func testCurlCodesMapToProtocolKinds() {
        XCTAssertEqual(TransferError.kind(of: CURLE_COULDNT_RESOLVE_HOST), .dns)
        XCTAssertEqual(TransferError.kind(of: CURLE_COULDNT_CONNECT), .connect)
        XCTAssertEqual(TransferError.kind(of: CURLE_OPERATION_TIMEDOUT), .timeout)
        XCTAssertEqual(TransferError.kind(of: CURLE_PEER_FAILED_VERIFICATION), .tls)
        XCTAssertEqual(TransferError.kind(of: CURLE_RECV_ERROR), .reset)
        XCTAssertEqual(TransferError.kind(of: CURLE_PARTIAL_FILE), .protocol)
        XCTAssertEqual(TransferError.kind(of: CURLE_TOO_MANY_REDIRECTS), .tooManyRedirects)
        XCTAssertEqual(TransferError.kind(of: CURLE_WEIRD_SERVER_REPLY), .protocol)
        XCTAssertEqual(TransferError.kind(of: CURLE_OUT_OF_MEMORY), .other)
    }
}

private final class OutcomeBox: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Result<HTTPResponse, TransferError>?
    func set(_ v: Result<HTTPResponse, TransferError>) { lock.withLock { value = v } }
    func get() -> Result<HTTPResponse, TransferError>? { lock.withLock { value } }
}

/// A TCP socket on loopback that accepts connections into its backlog and never answers.
private final class LoopbackListener {
    let fd: Int32
    let port: Int

    init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.fd = fd
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(fd, pointer, length) == 0 && listen(fd, 8) == 0 && getsockname(fd, pointer, &length) == 0
            }
        }
        guard bound else { throw NSError(domain: "listener", code: Int(errno)) }
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    deinit { close(fd) }
}
