@testable import FetchDaemon
import FetchEngine
import Foundation
import Glibc
import XCTest

/// The race between a lookup that missed and a store that finished right after it: the
/// request must look again (and find the answer), not go to the network as a leader.
final class HTTPCacheCollapseTests: XCTestCase {
    private func makeCache() throws -> (HTTPCache, HTTPEngine) {
        var template = Array("/tmp/fetchd-cachetest-XXXXXX".utf8CString)
        let dir = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
        addTeardownBlock { _ = system("rm -rf '\(dir)'") }
        let log = Logger(minimum: .error)
        let engine = HTTPEngine()
        let cache = HTTPCache(store: try CacheStore(directory: dir, maxBytes: 1 << 20),
                              blocking: WorkerThreads(name: "test-blocking", count: 2), engine: engine,
                              gate: HostGate(admission: HostAdmission(scheduler: HostScheduler()), shared: nil), log: log,
                              httpLog: HTTPLog(defaultDirectory: dir + "/logs", log: log))
        return (cache, engine)
    }

    func testALookupThatMissedBeforeAStoreFinishedLooksAgain() throws {
        let (cache, engine) = try makeCache()
        defer { engine.shutdown() }
        let seen = cache.storeGeneration  // read before the (missing) lookup
        let stored = expectation(description: "stored")
        cache.store(key: CacheStage.Key(url: "http://example.test/a", partition: ""), varyKey: "",
                    stored: StoredResponse(status: 200, headers: [HTTPHeader("Cache-Control", "max-age=60")],
                                           requestTime: 0, responseTime: 0),
                    body: Array("hello".utf8), replacing: nil) { stored.fulfill() }
        wait(for: [stored], timeout: 10)

        let again = Counter()
        XCTAssertFalse(cache.lead("a", seen: seen, or: { _ in XCTFail("no transfer to follow") }, again: { again.add() }))
        XCTAssertEqual(again.value, 1, "looked up again at once")
        // With nothing finished since it looked, the lookup leads, and the next one follows it.
        XCTAssertTrue(cache.lead("a", seen: cache.storeGeneration, or: { _ in }, again: { again.add() }))
        XCTAssertFalse(cache.lead("a", seen: cache.storeGeneration, or: { _ in }, again: { again.add() }))
        XCTAssertEqual(again.value, 1)
        cache.finishCollapse("a", sharing: nil)
    }
}

private final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    func add() { lock.lock(); count += 1; lock.unlock() }
    var value: Int { lock.lock(); defer { lock.unlock() }; return count }
}
