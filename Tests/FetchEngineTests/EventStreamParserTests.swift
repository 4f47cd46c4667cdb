import FetchEngine
import XCTest

/// The WHATWG event stream rules, each fed whole, byte by byte and in random pieces: the
/// events must not depend on where the network cut the stream.
final class EventStreamParserTests: XCTestCase {
    typealias Event = EventStreamParser.Event

    /// The stream cut at every byte, whole, and 50 times at random places (the same on every run).
    static func splittings(_ bytes: [UInt8]) -> [[[UInt8]]] {
        var all: [[[UInt8]]] = [[bytes], bytes.map { [$0] }]
        var rng = SplitMix64(seed: UInt64(bytes.count) &* 7919)
        for _ in 0..<50 {
            var pieces: [[UInt8]] = []
            var index = 0
            while index < bytes.count {
                let size = Int.random(in: 0...max(1, bytes.count / 3), using: &rng)
                let end = min(bytes.count, index + size)
                pieces.append(Array(bytes[index..<end]))
                index = end
            }
            all.append(pieces)
        }
        return all
    }

    /// The events of `stream` (checked to be the same however it is cut) and the parser after it.
    func parse(_ stream: [UInt8], file: StaticString = #filePath, line: UInt = #line) throws -> ([Event], EventStreamParser) {
        var first: ([Event], EventStreamParser)?
        for pieces in Self.splittings(stream) {
            var parser = EventStreamParser()
            var events: [Event] = []
            for piece in pieces { try parser.feed(piece) { events.append($0) } }
            if let first {
                XCTAssertEqual(events, first.0, "pieces \(pieces.map(\.count))", file: file, line: line)
                XCTAssertEqual(parser.lastEventID, first.1.lastEventID, file: file, line: line)
                XCTAssertEqual(parser.retryMs, first.1.retryMs, file: file, line: line)
            } else {
                first = (events, parser)
            }
        }
        return first!
    }

    func parse(_ text: String, file: StaticString = #filePath, line: UInt = #line) throws -> ([Event], EventStreamParser) {
        try parse(Array(text.utf8), file: file, line: line)
    }

    func testTheStandardsExamples() throws {
        let (events, _) = try parse("data: This is the first message.\n\ndata: This is the second message, it\ndata: has two lines.\n\ndata: This is the third message.\n\n")
        XCTAssertEqual(events.map(\.data), ["This is the first message.", "This is the second message, it\nhas two lines.",
                                            "This is the third message."])
        XCTAssertEqual(Set(events.map(\.type)), ["message"])

        let (typed, _) = try parse("event: add\ndata: 73857293\n\nevent: remove\ndata: 2153\n\nevent: add\ndata: 113411\n\n")
        XCTAssertEqual(typed, [Event(type: "add", data: "73857293"), Event(type: "remove", data: "2153"),
                               Event(type: "add", data: "113411")])

        // "data\n\ndata\ndata\n\ndata:": an event with "", one with "\n", and nothing at the end.
        let (empties, _) = try parse("data\n\ndata\ndata\n\ndata:")
        XCTAssertEqual(empties.map(\.data), ["", "\n"])

        // One space after the colon is dropped, no more.
        let (spaces, _) = try parse("data:test\n\ndata: test\n\ndata:  test\n\n")
        XCTAssertEqual(spaces.map(\.data), ["test", "test", " test"])
    }

    func testEveryLineEndAndMixturesOfThem() throws {
        for ending in ["\n", "\r", "\r\n"] {
            let (events, _) = try parse("data: a" + ending + "data: b" + ending + ending + "data: c" + ending + ending)
            XCTAssertEqual(events.map(\.data), ["a\nb", "c"], "line end \(Array(ending.utf8))")
        }
        let (mixed, _) = try parse("data: a\r\ndata: b\rdata: c\n\r\ndata: d\r\r")
        XCTAssertEqual(mixed.map(\.data), ["a\nb\nc", "d"])
        // CR CR is two line ends: an empty line after "data: x".
        let (crcr, _) = try parse("data: x\r\rdata: y\n\n")
        XCTAssertEqual(crcr.map(\.data), ["x", "y"])
    }

    func testCommentsAndUnknownFieldsAreIgnored() throws {
        let (events, _) = try parse(": a comment\ndata: one\n:another\nfoo: bar\nDATA: not data\ndata\n\n:\n\n")
        XCTAssertEqual(events, [Event(data: "one\n")])
    }

    func testAFieldWithoutAColonHasAnEmptyValue() throws {
        let (events, _) = try parse("event\ndata\n\n")
        XCTAssertEqual(events, [Event(type: "message", data: "")])
        // Only the first colon separates.
        let (colons, _) = try parse("data: a: b:c\n\n")
        XCTAssertEqual(colons.map(\.data), ["a: b:c"])
    }

    func testEmptyDataIsNotDispatchedAndClearsTheType() throws {
        let (events, parser) = try parse("event: first\nid: 7\n\ndata: x\n\n")
        XCTAssertEqual(events, [Event(type: "message", data: "x", lastEventID: "7")])
        XCTAssertEqual(parser.lastEventID, "7")
    }

    func testTheLastEventIDIsKeptAcrossEventsAndCanBeCleared() throws {
        let (events, parser) = try parse("id: 1\ndata: a\n\ndata: b\n\nid\ndata: c\n\nid: 3\ndata: d\n\n")
        XCTAssertEqual(events.map(\.lastEventID), ["1", "1", "", "3"])
        XCTAssertEqual(parser.lastEventID, "3")
    }

    func testAnIDWithNULIsIgnored() throws {
        let (events, parser) = try parse(Array("id: 5\ndata: a\n\nid: 6".utf8) + [0] + Array("x\ndata: b\n\n".utf8))
        XCTAssertEqual(events.map(\.lastEventID), ["5", "5"])
        XCTAssertEqual(parser.lastEventID, "5")
    }

    func testTheIDTakesEffectOnlyAtDispatch() throws {
        let (_, parser) = try parse("id: 1\ndata: a\n\nid: 2\ndata: b\n")
        XCTAssertEqual(parser.lastEventID, "1", "the stream ended before the event with id 2 was dispatched")
        // An empty line without data still sets it.
        let (none, set) = try parse("id: 9\n\n")
        XCTAssertEqual(none, [])
        XCTAssertEqual(set.lastEventID, "9")
    }

    func testRetryTakesASCIIDigitsOnly() throws {
        XCTAssertEqual(try parse("retry: 2500\n").1.retryMs, 2500)
        XCTAssertEqual(try parse("retry: 2500\nretry: 10\n").1.retryMs, 10)
        XCTAssertEqual(try parse("retry: 0\n").1.retryMs, 0)
        for ignored in ["retry: 1.5\n", "retry: -1\n", "retry:  1\n", "retry: 1 \n", "retry: 1e3\n", "retry:\n", "retry\n",
                        "retry: \u{661}\n"] {
            XCTAssertNil(try parse(ignored).1.retryMs, ignored)
        }
        XCTAssertEqual(try parse("retry: 100\nretry: x\n").1.retryMs, 100, "an invalid value leaves the last one")
        XCTAssertEqual(try parse("retry: 99999999999999999999999\n").1.retryMs, Int.max)
        // Retry alone dispatches nothing.
        XCTAssertEqual(try parse("retry: 5\n\n").0, [])
    }

    func testAByteOrderMarkAtTheStartIsDroppedOnce() throws {
        let bom: [UInt8] = [0xEF, 0xBB, 0xBF]
        let (events, _) = try parse(bom + Array("data: a\n\n".utf8))
        XCTAssertEqual(events.map(\.data), ["a"])
        // A second one is part of the field name: not "data" any more.
        let (second, _) = try parse(bom + bom + Array("data: a\n\n".utf8))
        XCTAssertEqual(second, [])
        // A BOM's first bytes that are not one stay in the stream (replaced as invalid UTF-8).
        let (partial, _) = try parse([0xEF, 0xBB] + Array(":\ndata: \u{FEFF}b\n\n".utf8))
        XCTAssertEqual(partial.map(\.data), ["\u{FEFF}b"])
    }

    func testInvalidUTF8IsReplaced() throws {
        let (events, _) = try parse(Array("data: a".utf8) + [0xFF, 0xC3] + Array("\nevent: t".utf8) + [0x80] + Array("\n\n".utf8))
        XCTAssertEqual(events, [Event(type: "t\u{FFFD}", data: "a\u{FFFD}\u{FFFD}")])
        let (utf8, _) = try parse("data: h\u{e9}llo \u{1F600}\n\n")
        XCTAssertEqual(utf8.map(\.data), ["h\u{e9}llo \u{1F600}"])
    }

    func testAnEventTheStreamDidNotEndIsDropped() throws {
        var parser = EventStreamParser()
        var events: [Event] = []
        try parser.feed(Array("data: whole\n\ndata: cut".utf8)) { events.append($0) }
        parser.finish()
        try parser.feed(Array("\n\n".utf8)) { events.append($0) }
        XCTAssertEqual(events.map(\.data), ["whole"])
    }

    func testANewStreamKeepsTheLastIDAndRetryAndMayStartWithABOM() throws {
        var parser = EventStreamParser()
        var events: [Event] = []
        try parser.feed(Array("retry: 300\nid: 41\ndata: a\n\nid: 42\ndata: half".utf8)) { events.append($0) }
        parser.newStream()
        try parser.feed([0xEF, 0xBB, 0xBF] + Array("data: b\n\n".utf8)) { events.append($0) }
        XCTAssertEqual(events, [Event(data: "a", lastEventID: "41"), Event(data: "b", lastEventID: "41")])
        XCTAssertEqual(parser.retryMs, 300)
        XCTAssertEqual(parser.lastEventID, "41")
    }

    func testALineOrAnEventOverTheLimitFailsWithKindProtocol() throws {
        var parser = EventStreamParser(maxBytes: 16)
        XCTAssertNoThrow(try parser.feed(Array("data: 0123456789\n\n".utf8)) { _ in })
        XCTAssertThrowsError(try parser.feed(Array("data: 01234567890\n".utf8)) { _ in }) { error in
            XCTAssertEqual((error as? TransferError)?.kind, .protocol)
        }
        var gathering = EventStreamParser(maxBytes: 16)
        XCTAssertThrowsError(try gathering.feed(Array("data: 01234567\ndata: 01234567\n".utf8)) { _ in }) { error in
            XCTAssertEqual((error as? TransferError)?.kind, .protocol)
        }
        // Fed a byte at a time, the line is refused as soon as it passes the limit.
        var slow = EventStreamParser(maxBytes: 16)
        var fed = 0
        XCTAssertThrowsError(try {
            for byte in Array(repeating: UInt8(ascii: "x"), count: 100) {
                try slow.feed([byte]) { _ in }
                fed += 1
            }
        }())
        XCTAssertEqual(fed, 16)
    }

    func testAnLLMStyleTokenStream() throws {
        var text = ""
        for n in 0..<200 { text += "id: \(n)\nevent: token\ndata: {\"t\":\"w\(n)\"}\n\n" }
        text += "event: done\ndata: [DONE]\n\n"
        let (events, parser) = try parse(text)
        XCTAssertEqual(events.count, 201)
        XCTAssertEqual(events[150], Event(type: "token", data: "{\"t\":\"w150\"}", lastEventID: "150"))
        XCTAssertEqual(events.last, Event(type: "done", data: "[DONE]", lastEventID: "199"))
        XCTAssertEqual(parser.lastEventID, "199")
    }
}
