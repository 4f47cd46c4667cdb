@testable import FetchDaemon
import JSONRPC
import XCTest

/// A HAR document's entries found in its text, one at a time, without the document's tree.
final class HARTextTests: XCTestCase {
    private func entries(_ text: String) throws(HARStubs.Invalid) -> [String] {
        var found: [String] = []
        let bytes = Array(text.utf8)
        let outcome = bytes.withUnsafeBytes { raw -> Result<Void, HARStubs.Invalid> in
            do throws(HARStubs.Invalid) {
                try HARText.forEachEntry(in: raw) { (index: Int, entry: UnsafeRawBufferPointer) throws(HARStubs.Invalid) in
                    XCTAssertEqual(index, found.count)
                    found.append(String(decoding: entry, as: UTF8.self))
                }
                return .success(())
            } catch {
                return .failure(error)
            }
        }
        try outcome.get()
        return found
    }

    private func refusal(_ text: String) -> String {
        do {
            return "accepted: \(try entries(text))"
        } catch {
            return error.reason
        }
    }

    func testEachEntryIsHandedOverAsItsText() throws {
        XCTAssertEqual(try entries(#"{"log": {"entries": []}}"#), [])
        XCTAssertEqual(try entries(#" {"log":{"entries":[ {"a": 1} , [2, {"b": "]}"}], "c\"]}" , 3.5e-2, true, null ]}} "#),
                       [#"{"a": 1}"#, #"[2, {"b": "]}"}]"#, #""c\"]}""#, "3.5e-2", "true", "null"])
    }

    func testMembersBeforeAndAfterArePassedOver() throws {
        let text = #"{"x": {"entries": [9]}, "log": {"version": "1.2", "pages": [{"p": [[], {}, "{"]}], "entries": [{"e": 1}], "comment": "}"}, "z": [1, {"y": null}]}"#
        XCTAssertEqual(try entries(text), [#"{"e": 1}"#])
    }

    func testWhatIsNotHAR() {
        for text in [#"[1, 2]"#, #"{"log": {}}"#, #"{"log": {"entries": {}}}"#, #"{"log": 5}"#, #"{}"#, #""log""#] {
            XCTAssertTrue(refusal(text).hasPrefix("not HAR"), "\(text): \(refusal(text))")
        }
    }

    func testWhatIsNotJSON() {
        for text in [#"{not json"#, #"{"log": {"entries": [1, x]}}"#, #"{"log": {"entries": []}} trailing"#, #"{"log": {"entries": ["#,
                     #"{"log": {"entries": [{"a" 1}]}}"#, #"{"log": {"entries": ["unterminated]}}"#, "{\"log\": {\"entries\": [\"a\u{1}\"]}}",
                     #"{"log": {"entries": [{"a": 1,}]}}"#, #"{"log": {"entries": [1 2]}}"#, #"{"log" {"entries": []}}"#] {
            XCTAssertTrue(refusal(text).hasPrefix("not JSON"), "\(text): \(refusal(text))")
        }
    }

    func testDeepNestingIsRefusedWithoutRecursion() {
        let deep = #"{"log": {"entries": ["# + String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000) + "]}}"
        XCTAssertTrue(refusal(deep).contains("nesting deeper"), refusal(deep))
    }

    func testStubsFromTextAsFromTheDocument() throws {
        let text = #"{"log": {"entries": [{"request": {"method": "GET", "url": "http://h/a"}, "response": {"status": 503, "content": {"text": "busy"}}}, {"request": {"method": "GET", "url": "http://h/a"}, "response": {"status": 200, "content": {"text": "b2s=", "encoding": "base64"}}}]}}"#
        let fromText = try HARStubs.stubs(fromText: Array(text.utf8), set: "s")
        let fromDocument = try HARStubs.stubs(from: try JSONCodec.decode(text), set: "s")
        XCTAssertEqual(fromText.count, 1)
        XCTAssertEqual(fromText.map(\.answers.count), fromDocument.map(\.answers.count))
        guard case .respond(let second) = fromText[0].answers[1] else { return XCTFail() }
        XCTAssertEqual(second.body, Array("ok".utf8))
        XCTAssertThrowsError(try HARStubs.stubs(fromText: Array(#"{"log": {"entries": [{"request": {}}]}}"#.utf8), set: "s")) { error in
            XCTAssertTrue((error as? HARStubs.Invalid)?.reason.contains("log.entries[0].request") ?? false, "\(error)")
        }
    }
}
