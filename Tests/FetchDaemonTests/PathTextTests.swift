@testable import FetchDaemon
import XCTest

final class PathTextTests: XCTestCase {
    func testLastComponentAsNSStringGivesIt() {
        XCTAssertEqual(PathText.lastComponent(of: "/tmp/scratch.tiff"), "scratch.tiff")
        XCTAssertEqual(PathText.lastComponent(of: "/tmp/lock/"), "lock")
        XCTAssertEqual(PathText.lastComponent(of: "/"), "/")
        XCTAssertEqual(PathText.lastComponent(of: "scratch"), "scratch")
        XCTAssertEqual(PathText.lastComponent(of: "a//b//"), "b")
    }

    func testDirectoryAsNSStringGivesIt() {
        XCTAssertEqual(PathText.directory(of: "/tmp/scratch.tiff"), "/tmp")
        XCTAssertEqual(PathText.directory(of: "/tmp/lock/"), "/tmp")
        XCTAssertEqual(PathText.directory(of: "/tmp"), "/")
        XCTAssertEqual(PathText.directory(of: "/"), "/")
        XCTAssertEqual(PathText.directory(of: "scratch.tiff"), "")
        XCTAssertEqual(PathText.directory(of: "a/b"), "a")
        XCTAssertEqual(PathText.directory(of: "/a//b"), "/a")
    }
}
