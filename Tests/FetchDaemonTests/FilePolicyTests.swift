@testable import FetchDaemon
import FetchEngine
import Glibc
import JSONRPC
import XCTest

/// FilePolicy.decodeCheckingPaths: with --allow-dir, the paths a decoding names are resolved
/// on the blocking threads, after it, and the error answered is the one a check in order
/// would have thrown first.
final class FilePolicyTests: XCTestCase {
    private static let blocking = WorkerThreads(name: "test-policy", count: 1)
    private var base = ""
    private var allowed: String { base + "/allowed" }
    private var outside: String { base + "/outside" }

    override func setUpWithError() throws {
        var template = Array("/tmp/fetchd-policy-XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        base = String(cString: try XCTUnwrap(made))
        mkdir(allowed, 0o700)
        mkdir(outside, 0o700)
    }

    override func tearDown() {
        rmdir(allowed)
        rmdir(outside)
        rmdir(base)
    }

    /// What one call did: the value handed on or the error, whether it came before the call
    /// returned, and whether it came on the caller's thread.
    private final class Seen: @unchecked Sendable {
        let done: XCTestExpectation
        let caller = pthread_self()
        private let lock = Locked<(value: Int?, error: (any Error)?, onCaller: Bool?)>((nil, nil, nil))
        init(_ done: XCTestExpectation) { self.done = done }

        func value(_ value: Int) {
            lock.withLock { $0.value = value; $0.onCaller = pthread_self() == caller }
            done.fulfill()
        }

        func error(_ error: any Error) {
            lock.withLock { $0.error = error; $0.onCaller = pthread_self() == caller }
            done.fulfill()
        }

        var result: (value: Int?, error: (any Error)?, onCaller: Bool?) { lock.withLock { $0 } }
    }

    /// Runs `decode` through the policy; returns what was seen and what the call threw.
    private func run(_ policy: FilePolicy, _ decode: (FilePolicy) throws -> Int) -> (Seen, thrown: (any Error)?) {
        let seen = Seen(expectation(description: "handed on"))
        var thrown: (any Error)?
        do {
            try policy.decodeCheckingPaths(on: Self.blocking, decode, then: { seen.value($0) }, failed: { seen.error($0) })
        } catch {
            thrown = error
            seen.done.fulfill()
        }
        wait(for: [seen.done], timeout: 5)
        return (seen, thrown)
    }

    func testWithoutAllowDirAllRunsOnTheCallersThread() {
        let (seen, thrown) = run(FilePolicy(allowedDirectories: [])) { policy in
            try policy.checkReadable("/anywhere/at/all", field: "bodyFile")
            return 1
        }
        XCTAssertNil(thrown)
        XCTAssertEqual(seen.result.value, 1)
        XCTAssertEqual(seen.result.onCaller, true)
    }

    func testNoPathNamedRunsOnTheCallersThread() {
        let (seen, _) = run(FilePolicy(allowedDirectories: [allowed])) { _ in 2 }
        XCTAssertEqual(seen.result.value, 2)
        XCTAssertEqual(seen.result.onCaller, true)
    }

    func testAllowedPathGoesOnOnTheBlockingThreads() {
        let (seen, thrown) = run(FilePolicy(allowedDirectories: [allowed])) { [allowed] policy in
            try policy.checkReadable(allowed + "/new.bin", field: "bodyFile")
            return 3
        }
        XCTAssertNil(thrown)
        XCTAssertEqual(seen.result.value, 3)
        XCTAssertEqual(seen.result.onCaller, false, "the path was resolved on the caller's thread")
    }

    func testRefusedPathFails() {
        let (seen, thrown) = run(FilePolicy(allowedDirectories: [allowed])) { [outside] policy in
            try policy.checkReadable(outside + "/x.bin", field: "bodyFile")
            return 4
        }
        XCTAssertNil(thrown)
        XCTAssertNil(seen.result.value)
        XCTAssertTrue(seen.result.error is NotAllowed, "\(String(describing: seen.result.error))")
        XCTAssertEqual(seen.result.onCaller, false)
    }

    func testLinkOutOfTheAllowedDirectoryFails() throws {
        let link = allowed + "/link"
        XCTAssertEqual(symlink(outside, link), 0)
        defer { unlink(link) }
        let (seen, _) = run(FilePolicy(allowedDirectories: [allowed])) { policy in
            try policy.checkReadable(link + "/x.bin", field: "bodyFile")
            return 5
        }
        XCTAssertTrue(seen.result.error is NotAllowed, "\(String(describing: seen.result.error))")
    }

    func testRefusedPathBeforeAMistakeWins() {
        let (seen, thrown) = run(FilePolicy(allowedDirectories: [allowed])) { [allowed, outside] policy in
            try policy.checkReadable(allowed + "/a", field: "caFile")
            try policy.checkReadable(outside + "/b", field: "certFile")
            throw RPCError.invalidParams(field: "keyFile", "a mistake found after both paths")
        }
        XCTAssertNil(thrown)
        XCTAssertTrue(seen.result.error is NotAllowed, "\(String(describing: seen.result.error))")
    }

    func testMistakeAfterAllowedPathsIsTheAnswer() {
        let (seen, thrown) = run(FilePolicy(allowedDirectories: [allowed])) { [allowed] policy in
            try policy.checkReadable(allowed + "/a", field: "caFile")
            throw RPCError.invalidParams(field: "keyFile", "a mistake found after the path")
        }
        XCTAssertNil(thrown)
        XCTAssertEqual((seen.result.error as? RPCError)?.code, .invalidParams)
        XCTAssertEqual(seen.result.onCaller, false)
    }

    func testMistakeBeforeAnyPathIsThrownAtOnce() {
        let (seen, thrown) = run(FilePolicy(allowedDirectories: [allowed])) { _ in
            throw RPCError.invalidParams(field: "method", "a mistake before any path")
        }
        XCTAssertEqual((thrown as? RPCError)?.code, .invalidParams)
        XCTAssertNil(seen.result.error)
        XCTAssertNil(seen.result.value)
    }

    func testPathSyntaxIsCheckedAtOnce() {
        let (_, thrown) = run(FilePolicy(allowedDirectories: [allowed])) { policy in
            try policy.checkReadable("relative/path", field: "bodyFile")
            return 6
        }
        XCTAssertEqual((thrown as? RPCError)?.code, .invalidParams)
    }
}
