import CJanssonArena
import Dispatch
import JSONRPC
import Foundation
import XCTest

/// jansson's parse trees come from a per-thread arena (`CJanssonArena`); these check that
/// every parse gives it back, that a tree larger than the arena is still read whole, and that
/// parses on several threads at once do not meet.
final class JSONArenaTests: XCTestCase {
    func testTheArenaIsEmptyAfterEveryParseGoodOrBad() throws {
        let line = #"{"jsonrpc":"2.0","id":7,"method":"fetch","params":{"url":"http://127.0.0.1/x"}}"#
        let value = try JSONCodec.decode(line)
        XCTAssertEqual(value["params"]?["url"], .string("http://127.0.0.1/x"))
        XCTAssertEqual(fetchd_json_arena_used(), 0)
        XCTAssertThrowsError(try JSONCodec.decode(#"{"jsonrpc":"2.0","id":"#))
        XCTAssertEqual(fetchd_json_arena_used(), 0, "a failed parse gives its blocks back too")
        // An integer beyond 64 bits is parsed a second time (widened); both parses give back.
        XCTAssertEqual(try JSONCodec.decode(#"{"big":123456789012345678901234567890}"#)["big"]?.numberValue, 1.2345678901234568e29)
        XCTAssertEqual(fetchd_json_arena_used(), 0)
    }

    func testATreeLargerThanTheArenaIsReadWhole() throws {
        // About 600 KiB of tree: most of it comes from malloc once the 64 KiB arena is full.
        let items = (0..<20_000).map { "\"item-\($0)\"" }.joined(separator: ",")
        let value = try JSONCodec.decode(#"{"a":[\#(items)],"tail":{"k":true}}"#)
        guard case .array(let array)? = value["a"] else { return XCTFail("no array") }
        XCTAssertEqual(array.count, 20_000)
        XCTAssertEqual(array[0], .string("item-0"))
        XCTAssertEqual(array[19_999], .string("item-19999"))
        XCTAssertEqual(value["tail"]?["k"], .bool(true))
        XCTAssertEqual(fetchd_json_arena_used(), 0)
        // The next small parse starts from an empty arena again.
        XCTAssertEqual(try JSONCodec.decode(#"{"x":[1,2,3]}"#)["x"], .array([1, 2, 3]))
    }

    func testParsesOnManyThreadsAtOnceKeepTheirOwnTrees() {
        let failures = Failures()
        DispatchQueue.concurrentPerform(iterations: 8) { thread in
            for round in 0..<300 {
                let text = #"{"thread":\#(thread),"round":\#(round),"s":"\#(String(repeating: "x", count: round % 90))","o":{"n":[\#(thread),\#(round)]}}"#
                guard let value = try? JSONCodec.decode(text),
                      value["thread"] == .integer(Int64(thread)), value["round"] == .integer(Int64(round)),
                      value["s"]?.stringValue?.count == round % 90,
                      value["o"]?["n"] == .array([.integer(Int64(thread)), .integer(Int64(round))]),
                      fetchd_json_arena_used() == 0 else {
                    failures.add("thread \(thread) round \(round)")
                    return
                }
            }
        }
        XCTAssertEqual(failures.all, [])
    }
}

private final class Failures: @unchecked Sendable {
    private let lock = NSLock()
    private var list: [String] = []
    func add(_ failure: String) { lock.lock(); list.append(failure); lock.unlock() }
    var all: [String] { lock.lock(); defer { lock.unlock() }; return list }
}
