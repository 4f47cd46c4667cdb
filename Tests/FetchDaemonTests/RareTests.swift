@testable import FetchDaemon
import FetchEngine
import JSONRPC
import XCTest

final class RareTests: XCTestCase {
    func testAbsentAndPresentValues() {
        let none = Rare<[String]>(nil)
        XCTAssertFalse(none.isPresent)
        XCTAssertNil(none.value)
        let some = Rare(["a", "b"])
        XCTAssertTrue(some.isPresent)
        XCTAssertEqual(some.value, ["a", "b"])
        let copy = some
        XCTAssertEqual(copy.value, ["a", "b"], "a copy reads the same value")
    }

    func testARequestModelKeepsItsRoutingAndOnlyThen() throws {
        var reader = try ParamReader(["url": "http://127.0.0.1/x"])
        var model = try RequestModel(reading: &reader, allowsBody: true, policy: FilePolicy(allowedDirectories: []))
        XCTAssertFalse(model.hasRouting)
        XCTAssertEqual(model.routing, RequestRouting())
        var routing = RequestRouting()
        routing.range = "0-9"
        routing.insecure = true
        model.routing = routing
        XCTAssertTrue(model.hasRouting)
        XCTAssertEqual(model.routing, routing)
        let request = model.httpRequest(maxBodyBytes: 100)
        XCTAssertEqual(request.range, "0-9")
        XCTAssertTrue(request.insecure)
        // Set back to the defaults: nothing is kept, and the request has none of them.
        model.routing = RequestRouting()
        XCTAssertFalse(model.hasRouting)
        XCTAssertNil(model.httpRequest(maxBodyBytes: 100).range)
    }
}
