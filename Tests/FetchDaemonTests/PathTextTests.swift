@testable import FetchDaemon
import XCTest

/// PathText against what NSString's lastPathComponent and deletingLastPathComponent give.
final class PathTextTests: XCTestCase {
    func testLastComponentAsNSStringGivesIt() {
        let cases = [("/tmp/scratch.tiff", "scratch.tiff"), ("/tmp/lock/", "lock"), ("/", "/"),
                     ("scratch", "scratch"), ("a//b//", "b")]
        for (path, expected) in cases { XCTAssertEqual(PathText.lastComponent(of: path), expected, path) }
    }

    func testDirectoryAsNSStringGivesIt() {
        let cases = [("/tmp/scratch.tiff", "/tmp"), ("/tmp/lock/", "/tmp"), ("/tmp", "/"), ("/", "/"),
                     ("scratch.tiff", ""), ("a/b", "a"), ("/a//b", "/a")]
        for (path, expected) in cases { XCTAssertEqual(PathText.directory(of: path), expected, path) }
    }
}
