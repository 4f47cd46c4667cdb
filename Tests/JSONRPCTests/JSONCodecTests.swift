import JSONRPC
import XCTest

final class JSONCodecTests: XCTestCase {
    func testEveryJSONTypeRoundTrips() throws {
        let text = #"{"n":null,"t":true,"f":false,"i":-42,"d":1.5,"s":"x","a":[1,"2",[]],"o":{"k":{}}}"#
        let value = try JSONCodec.decode(text)
        XCTAssertEqual(value["n"], .null)
        XCTAssertEqual(value["t"], .bool(true))
        XCTAssertEqual(value["f"], .bool(false))
        XCTAssertEqual(value["i"], .integer(-42))
        XCTAssertEqual(value["d"], .double(1.5))
        XCTAssertEqual(value["s"], .string("x"))
        XCTAssertEqual(value["a"], .array([.integer(1), .string("2"), .array([])]))
        XCTAssertEqual(value["o"], .object(["k": .object(JSONObject())]))
        XCTAssertEqual(JSONCodec.encodeString(value), text, "compact output keeps member order")
    }

    func testUnicodeEscapesAndSurrogatePairs() throws {
        let value = try JSONCodec.decode(#""caf\u00e9 \ud83d\ude00 \n\t\"""#)
        XCTAssertEqual(value, .string("café 😀 \n\t\""))
        XCTAssertEqual(try JSONCodec.decode(JSONCodec.encode(value)), value)
    }

    func testEmbeddedNulSurvives() throws {
        let value = try JSONCodec.decode(#""a\u0000b""#)
        XCTAssertEqual(value.stringValue?.utf8.count, 3)
        XCTAssertEqual(JSONCodec.encodeString(value), #""a\u0000b""#)
    }

    func testBigNumbers() throws {
        XCTAssertEqual(try JSONCodec.decode("9223372036854775807"), .integer(Int64.max))
        XCTAssertEqual(try JSONCodec.decode("-9223372036854775808"), .integer(Int64.min))
        // Past 64 bits: read as a double rather than refused.
        XCTAssertEqual(try JSONCodec.decode("123456789012345678901234567890"), .double(1.2345678901234568e29))
        XCTAssertEqual(try JSONCodec.decode("1e300"), .double(1e300))
        XCTAssertThrowsError(try JSONCodec.decode("1e999"), "overflowing a double is an error")
    }

    func testABigNumberLeavesEveryOtherIntegerExact() throws {
        // Before: one integer past 64 bits made the whole message be read again with every
        // integer a real, and an id of 7 was echoed as 7.0.
        let value = try JSONCodec.decode(#"{"id":7,"params":{"n":123456789012345678901234567890,"m":[-3,0,9223372036854775807,-9223372036854775808]}}"#)
        XCTAssertEqual(value["id"], .integer(7))
        XCTAssertEqual(value["params"]?["n"], .double(1.2345678901234568e29))
        XCTAssertEqual(value["params"]?["m"], [-3, 0, .integer(Int64.max), .integer(Int64.min)])
        XCTAssertEqual(JSONCodec.encodeString(value["id"]!), "7")
    }

    func testOnlyIntegersOutsideInt64AreWidened() throws {
        let cases: [(String, JSONValue)] = [
            ("[9223372036854775808]", [.double(9.223372036854775808e18)]),
            ("[-9223372036854775809]", [.double(-9.223372036854775809e18)]),
            ("[99999999999999999999,1]", [.double(1e20), 1]),
            ("[99999999999999999999,1000000000000000000,-9223372036854775807,9223372036854775806]",
             [.double(1e20), 1_000_000_000_000_000_000, -9_223_372_036_854_775_807, 9_223_372_036_854_775_806]),
            ("[1.5,99999999999999999999e0,1E2,-0]", [.double(1.5), .double(1e20), .double(100), 0]),
            // A real's fraction and exponent are never taken for integers.
            ("[99999999999999999999,1E-99999999999999999999,0.99999999999999999999,1e+0]",
             [.double(1e20), .double(0), .double(1), .double(1)]),
            // Digits inside strings, escaped quotes included, are never touched.
            (#"["99999999999999999999","a\"99999999999999999999\\",99999999999999999999]"#,
             [.string("99999999999999999999"), .string("a\"99999999999999999999\\"), .double(1e20)]),
            (#"{"99999999999999999999":99999999999999999999}"#, ["99999999999999999999": .double(1e20)]),
            ("99999999999999999999", .double(1e20)),
        ]
        for (text, expected) in cases { XCTAssertEqual(try JSONCodec.decode(text), expected, text) }
    }

    func testWideningNeverMakesAnInvalidTextValid() {
        for text in ["[99999999999999999999", "[099999999999999999999]", "[99999999999999999999x]",
                     "[-99999999999999999999-]", "[99999999999999999999, 1e999]", "{\"a\":99999999999999999999,}",
                     "[99999999999999999999] 1", "[\"99999999999999999999]"] {
            XCTAssertThrowsError(try JSONCodec.decode(text), text)
        }
    }

    func testARealsOverflowIsStillAnError() throws {
        XCTAssertThrowsError(try JSONCodec.decode("[99999999999999999999,1e99999999999999999999]")) { error in
            XCTAssertTrue((error as? JSONCodec.DecodingError)?.message.hasPrefix("real number overflow") == true, "\(error)")
        }
    }

    func testAnErrorAfterAWidenedIntegerIsReportedWhereItIs() throws {
        // The same error as in a text of the same shape without a big integer: same column.
        func message(_ text: String) -> String {
            do { _ = try JSONCodec.decode(text); return "accepted" } catch { return error.message }
        }
        XCTAssertEqual(message("[99999999999999999999, x]"), message("[1.000000000000000000, x]"))
        XCTAssertEqual(message("[99999999999999999999,\n 99999999999999999999, }"), message("[1.000000000000000000,\n 1.000000000000000000, }"))
        XCTAssertEqual(message("[1,\n99999999999999999999] 2"), message("[1,\n1.000000000000000000] 2"))
    }

    func testDoublesAreWrittenShortestButExact() throws {
        XCTAssertEqual(JSONCodec.encodeString(.double(0.493)), "0.493")
        XCTAssertEqual(JSONCodec.encodeString(.double(1.5)), "1.5")
        let awkward = 0.1 + 0.2
        XCTAssertEqual(try JSONCodec.decode(JSONCodec.encodeString(.double(awkward))), .double(awkward))
        XCTAssertEqual(JSONCodec.encodeString(.double(.nan)), "null", "JSON has no NaN")
    }

    func testInvalidUTF8IsAParseError() {
        let bytes: [UInt8] = [0x22, 0xC3, 0x28, 0x22]  // "\xC3(" is not UTF-8
        XCTAssertThrowsError(try JSONCodec.decode(bytes))
        XCTAssertThrowsError(try JSONCodec.decode([0x22, 0xFF, 0x22]))
    }

    func testMalformedTextsAreErrors() {
        for text in ["", "{", "[1,]", "{\"a\" 1}", "nul", "\"unterminated", "{} {}"] {
            XCTAssertThrowsError(try JSONCodec.decode(text), "should reject \(text)")
        }
    }

    func testStringsWithEveryControlCharacterRoundTrip() throws {
        let scalars = (0..<32).map { Character(Unicode.Scalar(UInt8($0))) }
        let value = JSONValue.string(String(scalars))
        XCTAssertEqual(try JSONCodec.decode(JSONCodec.encode(value)), value)
    }

    func testExactEscapesAndGrowthPastTheFirstBuffer() throws {
        XCTAssertEqual(JSONCodec.encodeString(.string("a\"b\\c\n\r\t\u{8}\u{c}\u{1}\u{1f}é")), #""a\"b\\c\n\r\t\b\f\u0001\u001fé""#)
        // Long strings, some needing many escapes, well past the encoder's first 1 KiB.
        let plain = String(repeating: "x", count: 5000)
        let escaped = String(repeating: "\"\n\u{1}", count: 3000)
        let value: JSONValue = ["a": .string(plain), "b": .string(escaped), "c": [.string(escaped), 1, true, .null]]
        let line = RPCMessage.line(value)
        XCTAssertEqual(line.last, UInt8(ascii: "\n"))
        XCTAssertEqual(try JSONCodec.decode(line.dropLast()), value)
        XCTAssertEqual(JSONCodec.encode(value).count, line.count - 1)
    }

    /// The encoder finds bytes to escape eight at a time: every special byte at every lane
    /// and offset, next to multi-byte UTF-8, must come out exactly as a byte-by-byte escape.
    func testEscapesAtEveryPositionMatchAByteByByteEncoder() {
        func reference(_ text: String) -> String {
            var out = "\""
            for scalar in text.unicodeScalars {
                switch scalar {
                case "\"": out += "\\\""
                case "\\": out += "\\\\"
                case "\n": out += "\\n"
                case "\r": out += "\\r"
                case "\t": out += "\\t"
                case "\u{8}": out += "\\b"
                case "\u{c}": out += "\\f"
                case let s where s.value < 0x20:
                    out += "\\u00" + String(s.value >> 4, radix: 16) + String(s.value & 0xF, radix: 16)
                default: out.unicodeScalars.append(scalar)
                }
            }
            return out + "\""
        }
        let specials: [Character] = ["\"", "\\", "\n", "\u{0}", "\u{1f}", "\u{7f}", " ", "é", "😀"]
        for length in 0..<20 {
            for position in 0..<max(length, 1) {
                for special in specials {
                    var characters = Array(repeating: Character("a"), count: length)
                    if position < length { characters[position] = special }
                    let text = String(characters)
                    XCTAssertEqual(JSONCodec.encodeString(.string(text)), reference(text), "length \(length) at \(position)")
                }
            }
        }
        let mixed = "\u{1}x\"\u{1f}😀\\" + String(repeating: "b", count: 17) + "\n"
        XCTAssertEqual(JSONCodec.encodeString(.string(mixed)), reference(mixed))
    }

    func testIntegersAreWrittenInFull() throws {
        for value: Int64 in [0, 7, -7, 10, -10, 99, 100, 1_234_567_890, Int64.max, Int64.min, Int64.min + 1] {
            XCTAssertEqual(JSONCodec.encodeString(.integer(value)), String(value))
            XCTAssertEqual(try JSONCodec.decode(JSONCodec.encodeString(.integer(value))), .integer(value))
        }
    }

    func testObjectLaterKeyReplacesEarlier() {
        var object: JSONObject = ["a": 1, "b": 2]
        object["a"] = 3
        object["b"] = nil
        XCTAssertEqual(object.keys, ["a"])
        XCTAssertEqual(object["a"], .integer(3))
    }
}

/// Doubles written without a String (whole thousandths) read exactly as `description` has them.
final class JSONDoubleTextTests: XCTestCase {
    func testThousandthsMatchDescription() {
        var generator = SystemRandomNumberGenerator()
        var values: [Double] = [0, 1, -1, 0.5, 0.001, -0.001, 0.12, 1.0e8, 999_999_999.999, 0.1 + 0.2, 1e9, 1e-7,
                                -0.0, 123.456, 0.01, 5.25, Double.pi, 1.0 / 3.0, 2.5e-3]
        for _ in 0..<20_000 {
            let k = Int64.random(in: -2_000_000_000_000...2_000_000_000_000, using: &generator)
            values.append(Double(k) / 1000)
            values.append(Double(k) / 100)
            values.append(Double.random(in: -1e10...1e10, using: &generator))
        }
        for value in values {
            XCTAssertEqual(JSONCodec.encodeString(.double(value)), value.description, "\(value)")
        }
    }
}

/// Objects written straight to text (`JSONObjectWriter`) read back as the tree they stand for.
final class JSONObjectWriterTests: XCTestCase {
    func testWrittenObjectIsTheSameJSONAsTheTree() throws {
        var writer = JSONObjectWriter(capacity: 4)  // grows several times
        writer.add("plain", "text")
        writer.add("quote\"back\\slash", "line\nbreak\u{01}\t\"end\" ✓ and more than eight bytes")
        writer.add("number", JSONValue.double(1.5))
        writer.add("nested", ["a": [1, "two", nil, true]])
        let encoded = writer.finish()
        let tree: JSONValue = [
            "plain": "text", "quote\"back\\slash": "line\nbreak\u{01}\t\"end\" ✓ and more than eight bytes",
            "number": 1.5, "nested": ["a": [1, "two", nil, true]],
        ]
        guard case .encoded = encoded else { return XCTFail("not written as text") }
        XCTAssertEqual(try JSONCodec.decode(JSONCodec.encode(encoded)), tree)
        XCTAssertEqual(encoded, tree)
        XCTAssertEqual(tree, encoded)
        XCTAssertNotEqual(encoded, ["plain": "other"])
        XCTAssertEqual(encoded["number"], 1.5)
        XCTAssertEqual(encoded.typeName, "object")
        // Inside a tree it is written as it is, between the members around it.
        let outer: JSONValue = ["before": 1, "inner": encoded, "after": 2]
        XCTAssertEqual(try JSONCodec.decode(JSONCodec.encode(outer)), ["before": 1, "inner": tree, "after": 2])
    }

    func testLowercasedKeysAreEscapedAndLowered() throws {
        var writer = JSONObjectWriter()
        writer.add(lowercasingKey: "Content-TYPE", "Text/Plain")
        writer.add(lowercasingKey: "X-\"Odd\"\u{1F}Name", "v")
        let written = writer.finish()
        let text = String(decoding: JSONCodec.encode(written), as: UTF8.self)
        // The value keeps its case; an escape of the key stays lowercase hex.
        XCTAssertEqual(text, #"{"content-type":"Text/Plain","x-\"odd\"\u001fname":"v"}"#)
    }

    /// Plain printable names are lowered in one pass; a backslash, DEL, non-ASCII or an
    /// empty name go the escaping way, with only ASCII letters lowered.
    func testLowercasedKeysOfEveryKind() throws {
        var writer = JSONObjectWriter()
        writer.add(lowercasingKey: "ETag", "1")
        writer.add(lowercasingKey: "A\\B", "2")
        writer.add(lowercasingKey: "X\u{7F}Y", "3")
        writer.add(lowercasingKey: "Ünï-CODE", "4")
        writer.add(lowercasingKey: "", "5")
        writer.add(lowercasingKey: "~!#$%&'*+-.^_`|0123456789@[]{}ZZ", "6")
        let decoded = try JSONCodec.decode(JSONCodec.encode(writer.finish()))
        XCTAssertEqual(decoded.objectValue?.keys, ["etag", "a\\b", "x\u{7F}y", "Ünï-code", "", "~!#$%&'*+-.^_`|0123456789@[]{}zz"])
        XCTAssertEqual(decoded["ünï-code"], nil)
        XCTAssertEqual(decoded["Ünï-code"], "4")
    }

    /// Thousandths are written as the double they stand for would be: the same text for every
    /// timing a result carries (hundredths of a millisecond from microseconds), and negatives.
    func testThousandthsAreWrittenAsTheirDouble() {
        var values: [Int64] = Array(0...2_000).map { $0 * 10 } + [-10, -5_000, 1, 7, 999, 1_000, 123_456_789_990, 999_999_999_990]
        var x: UInt64 = 0x9E37_79B9_7F4A_7C15
        for _ in 0..<2_000 {
            x = x &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            values.append(Int64(x >> 34) / 10 * 10)
        }
        for thousandths in values {
            var writer = JSONObjectWriter()
            writer.add("t", thousandths: thousandths)
            let viaThousandths = String(decoding: JSONCodec.encode(writer.finish()), as: UTF8.self)
            let viaDouble = JSONCodec.encodeString(["t": .double(Double(thousandths) / 1000)])
            XCTAssertEqual(viaThousandths, viaDouble, "\(thousandths)")
        }
    }

    func testEmptyObject() {
        let writer = JSONObjectWriter()
        let empty = writer.finish()
        XCTAssertEqual(JSONCodec.encodeString(empty), "{}")
    }
}
