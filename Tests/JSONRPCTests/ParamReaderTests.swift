import JSONRPC
import XCTest

final class ParamReaderTests: XCTestCase {
    func testNestedPathsNameTheField() throws {
        var reader = try ParamReader(["retry": ["maxAttempts": "five"]])
        var nested = try XCTUnwrap(try reader.nested("retry"))
        XCTAssertThrowsError(try nested.integer("maxAttempts")) { error in
            XCTAssertEqual((error as? RPCError)?.data?["field"], "retry.maxAttempts")
        }
    }

    func testRangesAndWholeNumbers() throws {
        var reader = try ParamReader(["a": 2.0, "b": 2.5, "c": 500])
        XCTAssertEqual(try reader.integer("a"), 2)
        XCTAssertThrowsError(try reader.integer("b"))
        XCTAssertThrowsError(try reader.integer("c", in: 0...100))
    }

    func testNullReadsAsAbsent() throws {
        var reader = try ParamReader(["a": nil])
        XCTAssertNil(try reader.string("a"))
        XCTAssertNoThrow(try reader.finish())
    }

    func testAFieldNobodyReadIsRefusedByName() throws {
        var reader = try ParamReader(["url": "http://x/", "timeot": 5, "method": "GET"])
        XCTAssertEqual(try reader.string("url"), "http://x/")
        XCTAssertEqual(try reader.string("method"), "GET")
        XCTAssertNil(try reader.number("timeout"), "an absent field reads as nil")
        XCTAssertThrowsError(try reader.finish()) { error in
            XCTAssertEqual((error as? RPCError)?.data?["field"], "timeot")
        }
    }

    func testReadsAreTrackedPastTheSixtyFourthField() throws {
        let keys = (0..<70).map { "k\($0)" }
        let object = JSONValue.object(JSONObject(distinctMembers: keys.map { (key: $0, value: JSONValue.integer(1)) }))
        var reader = try ParamReader(object)
        for key in keys where key != "k66" { XCTAssertEqual(try reader.integer(key), 1) }
        XCTAssertThrowsError(try reader.finish()) { error in
            XCTAssertEqual((error as? RPCError)?.data?["field"], "k66")
        }
        XCTAssertEqual(try reader.integer("k66"), 1)
        XCTAssertNoThrow(try reader.finish())
    }

    func testPositionalParamsAreRefused() {
        XCTAssertThrowsError(try ParamReader([1, 2])) { error in
            XCTAssertEqual((error as? RPCError)?.code, .invalidParams)
        }
    }
}
