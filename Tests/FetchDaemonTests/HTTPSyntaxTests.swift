import FetchEngine
import JSONRPC
import XCTest

@testable import FetchDaemon

/// The one validator of values that become part of an HTTP message, and the one path check,
/// as tables of cases; then through the request decoding, which must name the JSON path.
final class HTTPSyntaxTests: XCTestCase {
    private func refusal(_ body: () throws -> Void) -> RPCError? {
        do {
            try body()
            return nil
        } catch let error as RPCError {
            return error
        } catch {
            XCTFail("not an RPCError: \(error)")
            return nil
        }
    }

    private func assertRefused(_ text: String, as field: String = "f", _ check: (String, String) throws -> Void,
                               file: StaticString = #filePath, line: UInt = #line) {
        let error = refusal { try check(text, field) }
        XCTAssertEqual(error?.code, .invalidParams, "\(text.debugDescription) was accepted", file: file, line: line)
        XCTAssertEqual(error?.data?["field"], .string(field), file: file, line: line)
    }

    private func assertAccepted(_ text: String, _ check: (String, String) throws -> Void,
                                file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertNil(refusal { try check(text, "f") }, "\(text.debugDescription) was refused", file: file, line: line)
    }

    func testMethods() {
        for method in ["GET", "PROPFIND", "M-SEARCH", "x~!#$%&'*+.^_`|"] { assertAccepted(method, HTTPSyntax.checkMethod) }
        for method in ["", "GE T", "GET\r\n", "GET\n", "G\u{0}", "G(E)T", "GET/", "\u{7F}", "GÉT"] {
            assertRefused(method, HTTPSyntax.checkMethod)
        }
    }

    func testHeaderValuesAllowTabsSpacesAndUTF8Only() {
        let check = { (value: String, field: String) throws in _ = try HTTPSyntax.checkHeader(name: "X", value: value, field: field) }
        for value in ["", "a b", "a\tb", " lead", "é ü 日本", "\"quoted\"; a=b, c", "~!@#$%^&*()"] { assertAccepted(value, check) }
        for value in ["a\r\nX: y", "a\nb", "a\rb", "a\u{0}b", "a\u{1}", "\u{1B}[31m", "a\u{7F}", "\r\n\r\nGET / HTTP/1.1"] {
            assertRefused(value, check)
        }
    }

    func testHeaderNamesAreTokensAndFramingIsTheDaemons() {
        let check = { (name: String, field: String) throws in _ = try HTTPSyntax.checkHeader(name: name, value: "v", field: field) }
        for name in ["X-A", "Content-Type", "host", "x_y"] { assertAccepted(name, check) }
        for name in ["", "X A", "X:A", "X\r\nY", "X\u{0}", "Content-Length", "content-length", "TRANSFER-ENCODING"] {
            assertRefused(name, check)
        }
    }

    func testHeaderSizeAsSent() throws {
        XCTAssertEqual(try HTTPSyntax.checkHeader(name: "X-A", value: "hello", field: "f"), 3 + 2 + 5 + 2)
    }

    func testHeaderBudgetNamesTheHeaderThatGoesPastIt() throws {
        var budget = HTTPSyntax.HeaderBudget()
        try budget.add(HTTPLimits.headerBytes - 10, field: "headers.a")
        try budget.add(10, field: "headers.b")
        let error = refusal { try budget.add(1, field: "headers.c") }
        XCTAssertEqual(error?.data?["field"], "headers.c")
        XCTAssertEqual(error?.data?["limit"], .integer(Int64(HTTPLimits.headerBytes)))
    }

    func testTheRequestHeadBudgetLeavesRoomForWhatLibcurlAdds() {
        // A Cookie header (libcurl caps it at 8190 bytes) and an If-Range with a validator
        // that came in one response header line must fit beside the largest URL and headers.
        XCTAssertEqual(HTTPLimits.headroomBytes, HTTPLimits.requestHeadBytes - HTTPLimits.urlBytes * 4 / 3 - HTTPLimits.headerBytes)
        XCTAssertGreaterThan(HTTPLimits.headroomBytes, 8190 + HTTPLimits.responseHeaderLineBytes + 16 << 10)
        XCTAssertLessThan(HTTPLimits.responseHeaderBytes, 300 << 10, "below libcurl's MAX_HTTP_RESP_HEADER_SIZE")
    }

    func testURLLength() {
        XCTAssertNil(refusal { try HTTPSyntax.checkURLLength(HTTPLimits.urlBytes, field: "url") })
        let error = refusal { try HTTPSyntax.checkURLLength(HTTPLimits.urlBytes + 1, field: "url") }
        XCTAssertEqual(error?.data?["field"], "url")
        XCTAssertEqual(error?.data?["limit"], .integer(Int64(HTTPLimits.urlBytes)))
    }

    func testMediaTypes() {
        for type in ["text/plain", "text/plain; charset=utf-8", "application/vnd.api+json", "image/svg+xml",
                     "multipart/mixed;boundary=\"a b\"", "a/b ; x=y", "text/plain;", String(repeating: "a", count: 500) + "/b"] {
            assertAccepted(type, HTTPSyntax.checkMediaType)
        }
        for type in ["", "text", "/plain", "text/", "te xt/plain", "text/pl ain", "text/plain\r\nX: y", "text/plain\n",
                     "text/plain\u{0}", "text/plain; a=\u{1}", "text//plain", "t(e)xt/plain", ";a=b",
                     "a/" + String(repeating: "b", count: HTTPLimits.mediaTypeBytes)] {
            assertRefused(type, HTTPSyntax.checkMediaType)
        }
    }

    func testFilenamesAndFieldNamesRefuseControlCharactersOnly() {
        for name in ["file", "", "say \"hi\".txt", "a\\b", "résumé.pdf", "a;b=c", " spaced "] {
            assertAccepted(name, HTTPSyntax.checkDispositionParameter)
        }
        for name in ["a\r\nb", "a\nb", "a\rb", "a\u{0}", "\u{1F}", "a\u{7F}", "tab\there"] {
            assertRefused(name, HTTPSyntax.checkDispositionParameter)
        }
    }

    func testPathsAreAbsoluteAndWithoutNUL() {
        for path in ["/a", "/", "/a b/ü\n"] { assertAccepted(path, FilePolicy.checkPath) }
        for path in ["", "a", "./a", "/f\u{0}.x", "/f\u{0}", "\u{0}"] { assertRefused(path, FilePolicy.checkPath) }
    }

    func testNULRefusedBeforeTheAllowedDirectoryCheck() {
        // "/tmp/x\0/../../etc/passwd" would be "/tmp/x" to realpath: refused as text first.
        let policy = FilePolicy(allowedDirectories: ["/tmp"])
        let error = refusal { try policy.checkReadable("/tmp/x\u{0}/../../etc/passwd", field: "path") }
        XCTAssertEqual(error?.data?["field"], "path")
    }

    // MARK: through the request decoding

    private func decodeError(_ params: JSONValue, upload: Bool = false) -> RPCError? {
        let policy = FilePolicy(allowedDirectories: [])
        return refusal {
            if upload { _ = try UploadMethod.Params(params, policy: policy) } else { _ = try FetchMethod.Params(params, policy: policy) }
        }
    }

    func testDecodingNamesTheJSONPath() {
        let big = String(repeating: "a", count: HTTPLimits.headerBytes)
        let cases: [(JSONValue, Bool, String)] = [
            (["url": "http://h/a\r\nX: y"], false, "url"),
            (["url": "http://h/a\u{0}"], false, "url"),
            (["url": "http://h/", "method": "GET\r\n"], false, "method"),
            (["url": "http://h/", "headers": ["X-A": "a\nb"]], false, "headers.X-A"),
            (["url": "http://h/", "headers": ["Content-Length": "1"]], false, "headers.Content-Length"),
            (["url": "http://h/", "headers": ["X-A": .string(big)]], false, "headers.X-A"),
            (["url": .string("http://h/" + String(repeating: "p", count: HTTPLimits.urlBytes))], false, "url"),
            (["url": "http://h/", "query": ["q": .string(String(repeating: " ", count: HTTPLimits.urlBytes / 3))]], false, "query"),
            (["url": "http://h/", "bodyFile": "/etc/hostname\u{0}"], false, "bodyFile"),
            (["url": "http://h/", "files": [["content": "x", "mimetype": "a/b\r\nX: y"]]], true, "files[0].mimetype"),
            (["url": "http://h/", "files": [["content": "x"], ["content": "x", "filename": "a\nb"]]], true, "files[1].filename"),
            (["url": "http://h/", "files": [["path": "/tmp/a\nb"]]], true, "files[0].path"),
            (["url": "http://h/", "files": [["path": "/tmp/a\u{0}b"]]], true, "files[0].path"),
            (["url": "http://h/", "files": [["content": "x", "field": "f\r"]]], true, "files[0].field"),
            (["url": "http://h/", "fields": ["a\nb": "v"]], true, "fields.a\nb"),
        ]
        for (params, upload, field) in cases {
            let error = decodeError(params, upload: upload)
            XCTAssertEqual(error?.code, .invalidParams, "\(params)")
            XCTAssertEqual(error?.data?["field"], .string(field), "\(params)")
        }
    }

    func testGuessedMediaTypeAndEscapedQuotesPass() throws {
        let params = try UploadMethod.Params(
            ["url": "http://h/", "files": [["content": "x", "filename": "say \"hi\".json", "field": "f\"x"]]],
            policy: FilePolicy(allowedDirectories: []))
        XCTAssertEqual(params.files[0].mimetype, "application/json")
        XCTAssertEqual(params.files[0].filename, "say \"hi\".json", "sent as %22 by libcurl, not refused")
    }
}
