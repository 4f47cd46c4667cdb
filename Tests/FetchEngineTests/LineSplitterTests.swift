import FetchEngine
import XCTest

final class LineSplitterTests: XCTestCase {
    /// The lines of `body` (checked to be the same however it is cut) and the count.
    func split(_ body: [UInt8], maxBytes: Int = LineSplitter.maxBytes,
               file: StaticString = #filePath, line: UInt = #line) throws -> [String] {
        var first: [String]?
        for pieces in EventStreamParserTests.splittings(body) {
            var splitter = LineSplitter(maxBytes: maxBytes)
            var lines: [String] = []
            for piece in pieces { try splitter.feed(piece) { lines.append($0) } }
            try splitter.finish { lines.append($0) }
            XCTAssertEqual(splitter.lines, lines.count, file: file, line: line)
            if let first {
                XCTAssertEqual(lines, first, "pieces \(pieces.map(\.count))", file: file, line: line)
            } else {
                first = lines
            }
        }
        return first!
    }

    func split(_ text: String, file: StaticString = #filePath, line: UInt = #line) throws -> [String] {
        try split(Array(text.utf8), file: file, line: line)
    }

    func testLFAndCRLFAreRemovedAndALoneCRIsKept() throws {
        XCTAssertEqual(try split("a\nb\n"), ["a", "b"])
        XCTAssertEqual(try split("a\r\nb\r\n"), ["a", "b"])
        XCTAssertEqual(try split("a\r\nb\nc\r\n"), ["a", "b", "c"])
        XCTAssertEqual(try split("a\rb\n"), ["a\rb"])
        XCTAssertEqual(try split("a\r\r\n"), ["a\r"])
    }

    func testEmptyLinesAreLines() throws {
        XCTAssertEqual(try split("\n\na\n\r\n"), ["", "", "a", ""])
        XCTAssertEqual(try split(""), [])
    }

    func testALastLineWithoutANewlineComesAtTheEnd() throws {
        XCTAssertEqual(try split("a\nlast"), ["a", "last"])
        XCTAssertEqual(try split("only"), ["only"])
        XCTAssertEqual(try split("a\n"), ["a"], "a newline at the end makes no empty last line")
    }

    func testInvalidUTF8IsReplaced() throws {
        XCTAssertEqual(try split([0x61, 0xFF, 0x0A, 0xC3, 0xA9, 0x0A, 0xE2, 0x82]), ["a\u{FFFD}", "\u{e9}", "\u{FFFD}"])
        // A character cut between two pieces is whole again.
        XCTAssertEqual(try split("{\"w\":\"\u{1F600}\"}\n"), ["{\"w\":\"\u{1F600}\"}"])
    }

    func testNDJSON() throws {
        var body = ""
        for n in 0..<100 { body += "{\"type\":\"change\",\"n\":\(n)}\n" }
        let lines = try split(body)
        XCTAssertEqual(lines.count, 100)
        XCTAssertEqual(lines[42], "{\"type\":\"change\",\"n\":42}")
    }

    func testALineOverTheLimitFailsWithKindProtocol() throws {
        // Exactly the limit, with either newline, and unended: fine.
        XCTAssertEqual(try split(Array("0123456789abcdef\r\n0123456789abcdef\n0123456789abcdef".utf8), maxBytes: 16).count, 3)
        for body in ["0123456789abcdefg\n", "0123456789abcdefg\r\n", "0123456789abcdefg", "ok\n0123456789abcdef\rx\n"] {
            XCTAssertThrowsError(try split(Array(body.utf8), maxBytes: 16), body) { error in
                XCTAssertEqual((error as? TransferError)?.kind, .protocol)
            }
        }
        // Held back as it comes: a line without end is refused once past the limit, not at its end.
        var splitter = LineSplitter(maxBytes: 16)
        var fed = 0
        XCTAssertThrowsError(try {
            for _ in 0..<1000 {
                try splitter.feed(Array("xxxx".utf8)) { _ in }
                fed += 1
            }
        }())
        XCTAssertEqual(fed, 4)
    }

    func testTheDefaultLimitIsOneMebibyte() throws {
        XCTAssertEqual(LineSplitter.maxBytes, 1 << 20)
        var splitter = LineSplitter()
        var lines: [Int] = []
        try splitter.feed(Array(repeating: UInt8(ascii: "a"), count: 1 << 20) + [0x0A]) { lines.append($0.utf8.count) }
        XCTAssertEqual(lines, [1 << 20])
        XCTAssertThrowsError(try splitter.feed(Array(repeating: UInt8(ascii: "a"), count: (1 << 20) + 1) + [0x0A]) { _ in })
    }
}
