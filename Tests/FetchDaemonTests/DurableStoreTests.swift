@testable import FetchDaemon
import JSONRPC
import XCTest

final class DurableStoreTests: XCTestCase {
    func testCredentialHeadersAreNeverStored() {
        let params: JSONValue = ["url": "http://h/", "headers": ["authorization": "Bearer x", "Cookie": "a=b",
                                                                 "Proxy-Authorization": "Basic y", "X-Keep": "1"]]
        let stored = DurableStore.storable(params, jobID: "j1")
        XCTAssertEqual(stored["headers"], ["X-Keep": "1"])
        XCTAssertEqual(stored["jobId"], "j1")
        XCTAssertEqual(stored["url"], "http://h/")
    }

    func testFileNames() {
        XCTAssertEqual(DurableStore.fileName(for: "iso-2026.01_a"), "iso-2026.01_a.json")
        for odd in ["../x", "a/b", ".hidden", "sp ace"] {
            let name = DurableStore.fileName(for: odd)
            XCTAssertTrue(name.hasPrefix("sha256-") && name.hasSuffix(".json") && !name.contains("/"), name)
        }
        XCTAssertNotEqual(DurableStore.fileName(for: "a/b"), DurableStore.fileName(for: "a/c"))
    }
}
