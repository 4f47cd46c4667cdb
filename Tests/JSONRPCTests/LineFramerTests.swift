import JSONRPC
import XCTest

final class LineFramerTests: XCTestCase {
    func testByteByByte() {
        var framer = LineFramer(maxLineBytes: 100)
        var events: [LineFramer.Event] = []
        for byte in Array("{\"a\":1}\r\n\n  \n[2]\n".utf8) { events += framer.feed([byte]) }
        XCTAssertEqual(events, [.line(Array("{\"a\":1}".utf8)), .line(Array("[2]".utf8))])
        XCTAssertEqual(framer.bufferedByteCount, 0)
    }

    func testManyMessagesInOneRead() {
        var framer = LineFramer(maxLineBytes: 100)
        let text = (1...50).map { "{\"id\":\($0)}\n" }.joined()
        let events = framer.feed(Array(text.utf8))
        XCTAssertEqual(events.count, 50)
        XCTAssertEqual(events.last, .line(Array("{\"id\":50}".utf8)))
    }

    func testPartialLineWaitsForItsNewline() {
        var framer = LineFramer(maxLineBytes: 100)
        XCTAssertEqual(framer.feed(Array("{\"a\":".utf8)), [])
        XCTAssertEqual(framer.feed(Array("1}\n{".utf8)), [.line(Array("{\"a\":1}".utf8))])
        XCTAssertEqual(framer.bufferedByteCount, 1)
    }

    func testOversizeLineIsReportedOnceAndTheNextLineStillWorks() {
        var framer = LineFramer(maxLineBytes: 10)
        var events: [LineFramer.Event] = []
        events += framer.feed(Array(repeating: UInt8(ascii: "x"), count: 8))
        events += framer.feed(Array(repeating: UInt8(ascii: "x"), count: 8))
        events += framer.feed(Array(repeating: UInt8(ascii: "x"), count: 100))
        events += framer.feed(Array("xx\n[1]\n".utf8))
        XCTAssertEqual(events, [.tooLarge, .line(Array("[1]".utf8))])
    }

    func testLineOfExactlyTheLimitPasses() {
        var framer = LineFramer(maxLineBytes: 5)
        XCTAssertEqual(framer.feed(Array("12345\n123456\n".utf8)), [.line(Array("12345".utf8)), .tooLarge])
    }
}
