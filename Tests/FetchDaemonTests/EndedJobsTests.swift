@testable import FetchDaemon
import JSONRPC
import XCTest

final class EndedJobsTests: XCTestCase {
    private func ended(_ id: String, _ n: Int = 0) -> EndedJob {
        EndedJob(jobID: id, state: "finished", durable: false, restarts: 0, answer: .success(["n": JSONValue(n)]))
    }

    func testKeepsTheLastCapacityJobs() {
        var ring = EndedJobs(capacity: 3)
        for i in 1...5 { ring.add(ended("j\(i)")) }
        XCTAssertEqual(ring.count, 3)
        XCTAssertNil(ring["j1"])
        XCTAssertNil(ring["j2"])
        XCTAssertNotNil(ring["j3"])
        XCTAssertNotNil(ring["j5"])
    }

    func testAnIDEndedAgainIsNotDroppedWithItsOlderSlot() {
        var ring = EndedJobs(capacity: 2)
        ring.add(ended("a", 1))
        ring.add(ended("b"))
        ring.add(ended("a", 2))  // the ring is full: its oldest slot (the first "a") is reused
        XCTAssertEqual(try ring["a"]?.answer.get()["n"], JSONValue(2))
        XCTAssertNotNil(ring["b"])
        ring.add(ended("c"))  // drops "b"
        XCTAssertNil(ring["b"])
        XCTAssertNotNil(ring["a"])
        ring.add(ended("d"))  // drops the second "a"
        XCTAssertNil(ring["a"])
        XCTAssertEqual(ring.count, 2)
    }

    func testAFetchResultLosesItsBody() {
        let kept = EndedJobs.kept(["status": 200, "body": "x", "bytes": 1])
        XCTAssertEqual(kept["body"], nil)
        XCTAssertEqual(kept["bodyOmitted"], true)
        XCTAssertEqual(kept["status"], 200)
    }

    func testEveryBodyFieldGoesAndTheRestKeepsItsOrder() {
        let result: JSONValue = ["status": 200, "json": ["a": 1], "url": "u", "bodyBase64": "eA==", "jsonError": "e",
                                 "body": "x", "bytes": 1]
        XCTAssertEqual(EndedJobs.kept(result).objectValue?.keys, ["status", "url", "bytes", "bodyOmitted"])
        let noBody: JSONValue = ["status": 204, "url": "u"]
        XCTAssertEqual(EndedJobs.kept(noBody).objectValue?.keys, ["status", "url"])
    }

    /// A fetch's small body is stored with the result (shared with the answer) and left out
    /// when read; a large one, or a json tree, is left out at once. Either way a reader never
    /// sees a body.
    func testAFetchResultIsReadWithoutItsBodyHoweverItIsStored() {
        let small: JSONValue = ["status": 200, "body": "x", "bytes": 1]
        let large: JSONValue = ["status": 200, "body": .string(String(repeating: "y", count: EndedJobs.sharedBodyBytes + 1)), "bytes": 1]
        let tree: JSONValue = ["status": 200, "json": ["a": 1]]
        XCTAssertTrue(EndedJobs.keeping(small).omitsBody)
        XCTAssertEqual(EndedJobs.keeping(small).0, small, "stored as the answer was")
        XCTAssertFalse(EndedJobs.keeping(large).omitsBody)
        XCTAssertEqual(EndedJobs.keeping(large).0["body"], nil, "a large body is not kept")
        XCTAssertFalse(EndedJobs.keeping(tree).omitsBody)
        XCTAssertEqual(EndedJobs.keeping(tree).0["json"], nil)
        for result in [small, large, tree] {
            let ended = EndedJob(jobID: "j", state: "finished", durable: false, restarts: 0, answer: .success(result), isFetch: true)
            let read = try? ended.answer.get()
            XCTAssertEqual(read, EndedJobs.kept(result))
            XCTAssertEqual(read?["bodyOmitted"], true)
            XCTAssertEqual(read?["body"], nil)
            XCTAssertEqual(read?["json"], nil)
        }
        let download = EndedJob(jobID: "d", state: "finished", durable: false, restarts: 0, answer: .success(small))
        XCTAssertEqual(try? download.answer.get(), small, "only a fetch's result loses its body")
    }

    func testBodyFieldsAreKnownByNameNotByLength() {
        for key in ["body", "json", "jsonError", "bodyBase64"] { XCTAssertTrue(EndedJobs.isBodyField(key), key) }
        // Same lengths as the body fields, and near misses.
        for key in ["url", "jobId", "Body", "JSON", "bod", "bodyX", "redirects", "elapsedMs", "jsonErrorX", "bodyBase65",
                    "httpVersion", "", "bodyOmitted"] {
            XCTAssertFalse(EndedJobs.isBodyField(key), key)
        }
    }
}
