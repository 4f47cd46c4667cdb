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

    func testPositionalParamsAreRefused() {
        XCTAssertThrowsError(try ParamReader([1, 2])) { error in
            XCTAssertEqual((error as? RPCError)?.code, .invalidParams)
        }
    }
}
