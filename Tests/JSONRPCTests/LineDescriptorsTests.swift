import Glibc
import JSONRPC
import Synchronization
import XCTest

/// Descriptors that came with a line: taken in order, the rest closed once, each counted
/// back to the connection exactly once.
final class LineDescriptorsTests: XCTestCase {
    private func pipeEnds() -> (read: Int32, write: Int32) {
        var fds: [Int32] = [-1, -1]
        XCTAssertEqual(pipe(&fds), 0)
        return (fds[0], fds[1])
    }

    private func isOpen(_ fd: Int32) -> Bool { fcntl(fd, F_GETFD) != -1 }

    func testTakeInOrderThenCloseTheRest() {
        let a = pipeEnds(), b = pipeEnds(), c = pipeEnds()
        let released = Mutex(0)
        let line = LineDescriptors([a.write, b.write, c.write]) { n in released.withLock { $0 += n } }
        XCTAssertEqual(line.take(), a.write)
        XCTAssertEqual(line.take(), b.write)
        XCTAssertEqual(line.remaining, 1)
        line.closeUntaken()
        line.closeUntaken()
        XCTAssertNil(line.take())
        XCTAssertEqual(released.withLock { $0 }, 3)
        XCTAssertTrue(isOpen(a.write))
        XCTAssertTrue(isOpen(b.write))
        XCTAssertFalse(isOpen(c.write))
        for fd in [a.read, a.write, b.read, b.write, c.read] { close(fd) }
    }
}
