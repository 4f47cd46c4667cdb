import FetchEngine
import JSONRPC
import XCTest

@testable import FetchDaemon

final class RequestModelTests: XCTestCase {
    let anyFile = FilePolicy(allowedDirectories: [])

    private func model(_ params: JSONValue, allowsBody: Bool = true, policy: FilePolicy? = nil) throws -> RequestModel {
        var reader = try ParamReader(params)
        let model = try RequestModel(reading: &reader, allowsBody: allowsBody, policy: policy ?? anyFile)
        try reader.finish()
        return model
    }

    private func field(of error: any Error) -> String? {
        (error as? RPCError)?.data?["field"]?.stringValue
    }

    /// A URL alone skips the reading of every other field: the model is the same as one read
    /// field by field (a null comment makes the reader go through all of them).
    func testAURLAloneGivesEveryDefault() throws {
        let alone = try model(["url": "http://h/x"])
        let read = try model(["url": "http://h/x", "comment": nil])
        XCTAssertEqual(alone.url, read.url)
        XCTAssertEqual(alone.method, read.method)
        XCTAssertEqual(alone.headers, read.headers)
        XCTAssertEqual(alone.removedHeaders, read.removedHeaders)
        XCTAssertEqual(alone.query, read.query)
        XCTAssertEqual(alone.body, read.body)
        XCTAssertEqual(alone.timeout, read.timeout)
        XCTAssertEqual(alone.connectTimeout, read.connectTimeout)
        XCTAssertEqual(alone.maxTime, read.maxTime)
        XCTAssertEqual(alone.routing, read.routing)
        XCTAssertEqual(alone.hasRouting, read.hasRouting)
        XCTAssertEqual(alone.retry, read.retry)
        XCTAssertEqual(alone.maxRedirects, read.maxRedirects)
        XCTAssertEqual(alone.cookieJar, read.cookieJar)
        XCTAssertEqual(alone.priority, read.priority)
        XCTAssertEqual(alone.progress, read.progress)
        XCTAssertEqual(alone.exchange, read.exchange)
        XCTAssertEqual(alone.jobID, read.jobID)
        XCTAssertEqual(alone.detach, read.detach)
        XCTAssertEqual(alone.comment, read.comment)
        XCTAssertEqual(alone.auth, read.auth)
        XCTAssertEqual(alone.stubs, read.stubs)
        XCTAssertEqual(alone.cache, read.cache)
        XCTAssertEqual(alone.method, "GET")
    }

    func testEveryMemberReadIsKnownByTheReader() throws {
        var reader = try ParamReader(["url": "http://h/", "timeout": 5])
        XCTAssertFalse(reader.readAll)
        _ = try reader.string("url")
        XCTAssertFalse(reader.readAll, "timeout is not read yet")
        _ = try reader.number("timeout")
        XCTAssertTrue(reader.readAll)
        XCTAssertTrue(try ParamReader(nil).readAll, "no params: nothing to read")
    }

    func testMethodDefaultsToGETOrPOSTWhenABodyIsGiven() throws {
        XCTAssertEqual(try model(["url": "http://h/"]).method, "GET")
        XCTAssertEqual(try model(["url": "http://h/", "json": ["a": 1]]).method, "POST")
        XCTAssertEqual(try model(["url": "http://h/", "body": "x", "method": "PUT"]).method, "PUT")
        XCTAssertEqual(try model(["url": "http://h/", "json": false]).method, "POST", "false is a JSON body")
    }

    func testJSONBodyIsEncodedWithItsContentType() throws {
        let request = try model(["url": "http://h/", "json": ["a": [1, true]]]).httpRequest(maxBodyBytes: 10)
        XCTAssertEqual(request.body, .bytes(Array(#"{"a":[1,true]}"#.utf8)))
        XCTAssertEqual(request.header(named: "content-type"), "application/json")
    }

    func testGivenContentTypeWins() throws {
        let request = try model(["url": "http://h/", "json": 1, "headers": ["Content-Type": "application/vnd.x+json"]])
            .httpRequest(maxBodyBytes: 10)
        XCTAssertEqual(request.headers.filter { $0.name.lowercased() == "content-type" }.map(\.value), ["application/vnd.x+json"])
    }

    func testFormAndQueryValuesOfEveryAllowedType() throws {
        let request = try model([
            "url": "http://h/p?z=0", "query": ["q": "a b", "n": 2, "f": 1.5, "t": true, "list": ["x", 3]],
            "form": ["name": "J Doe", "tags": ["a", "b"]],
        ]).httpRequest(maxBodyBytes: 10)
        XCTAssertEqual(request.url, "http://h/p?z=0&q=a%20b&n=2&f=1.5&t=true&list=x&list=3")
        XCTAssertEqual(request.body, .bytes(Array("name=J+Doe&tags=a&tags=b".utf8)))
        XCTAssertEqual(request.header(named: "Content-Type"), "application/x-www-form-urlencoded")
    }

    func testBase64BodyAndBadBase64() throws {
        XCTAssertEqual(try model(["url": "http://h/", "bodyBase64": "AAEC/w=="]).httpRequest(maxBodyBytes: 1).body,
                       .bytes([0, 1, 2, 255]))
        XCTAssertThrowsError(try model(["url": "http://h/", "bodyBase64": "***"])) { XCTAssertEqual(field(of: $0), "bodyBase64") }
    }

    func testOnlyOneBodyField() {
        XCTAssertThrowsError(try model(["url": "http://h/", "body": "a", "json": 1])) { error in
            XCTAssertEqual((error as? RPCError)?.code, .invalidParams)
        }
    }

    func testUploadRefusesBodyFields() {
        XCTAssertThrowsError(try model(["url": "http://h/", "body": "a"], allowsBody: false)) { XCTAssertEqual(field(of: $0), "body") }
    }

    func testEveryBadFieldIsNamed() {
        let cases: [(JSONValue, String)] = [
            (["url": 5], "url"),
            (["url": "nope"], "url"),
            (["url": "http://h/", "method": "GE T"], "method"),
            (["url": "http://h/", "headers": ["X-A": 1]], "headers.X-A"),
            (["url": "http://h/", "headers": ["Bad Name": "v"]], "headers.Bad Name"),
            (["url": "http://h/", "headers": ["X-A": "a\r\nInjected: 1"]], "headers.X-A"),
            (["url": "http://h/", "query": ["a": ["b": 1]]], "query.a"),
            (["url": "http://h/", "query": ["a": [["b"]]]], "query.a[0]"),
            (["url": "http://h/", "timeout": "10"], "timeout"),
            (["url": "http://h/", "timeout": 0], "timeout"),
            (["url": "http://h/", "maxRedirects": -1], "maxRedirects"),
            (["url": "http://h/", "retry": "yes"], "retry"),
            (["url": "http://h/", "retry": ["maxAttempts": 0]], "retry.maxAttempts"),
            (["url": "http://h/", "retry": ["statuses": [503, 42]]], "retry.statuses[1]"),
            (["url": "http://h/", "retry": ["tries": 3]], "retry.tries"),
            (["url": "http://h/", "cookieJar": true], "cookieJar"),
            (["url": "http://h/", "priority": "high"], "priority"),
            (["url": "http://h/", "progress": 1], "progress"),
            (["url": "http://h/", "jobId": ""], "jobId"),
            (["url": "http://h/", "detach": "no"], "detach"),
            (["url": "http://h/", "comment": 3], "comment"),
            (["url": "http://h/", "bodyFile": "relative/path"], "bodyFile"),
            (["url": "http://h/", "urll": "typo"], "urll"),
        ]
        for (params, expected) in cases {
            XCTAssertThrowsError(try model(params), "\(params)") { error in
                XCTAssertEqual((error as? RPCError)?.code, .invalidParams, "\(params)")
                XCTAssertEqual(field(of: error), expected, "\(params)")
            }
        }
    }

    func testSchemeOtherThanHTTPIsNotAllowed() {
        XCTAssertThrowsError(try model(["url": "ftp://h/"])) { XCTAssertTrue($0 is NotAllowed) }
    }

    func testAllowedDirectoriesConfineBodyFiles() throws {
        let policy = FilePolicy(allowedDirectories: [NSTemporaryDirectory()])
        XCTAssertNoThrow(try model(["url": "http://h/", "bodyFile": .string(NSTemporaryDirectory() + "/x")], policy: policy))
        XCTAssertThrowsError(try model(["url": "http://h/", "bodyFile": "/etc/passwd"], policy: policy)) { XCTAssertTrue($0 is NotAllowed) }
        XCTAssertThrowsError(try model(["url": "http://h/", "bodyFile": .string(NSTemporaryDirectory() + "/../etc/passwd")], policy: policy)) {
            XCTAssertTrue($0 is NotAllowed, "dot-dot cannot climb out")
        }
    }

    func testTimeoutsBecomeMilliseconds() throws {
        let request = try model(["url": "http://h/", "timeout": 0.25, "connectTimeout": 0.0015]).httpRequest(maxBodyBytes: 1)
        XCTAssertEqual(request.timeoutMs, 250)
        XCTAssertEqual(request.connectTimeoutMs, 2)
    }
}

final class ResponseFieldsTests: XCTestCase {
    func testHeadersAreLowercasedAndJoined() {
        let headers = ResponseFields.headers([
            HTTPHeader("X-Multi", "a"), HTTPHeader("x-multi", "b"),
            HTTPHeader("Set-Cookie", "a=1; Path=/"), HTTPHeader("Set-Cookie", "b=2, c"),
            HTTPHeader("Content-Type", "text/plain"),
        ])
        XCTAssertEqual(headers["x-multi"], "a, b")
        XCTAssertEqual(headers["set-cookie"], "a=1; Path=/\nb=2, c")
        XCTAssertEqual(headers["content-type"], "text/plain")
    }

    func testHeaderBytesAreWrittenAsValidEscapedJSON() throws {
        // Written from the bytes as they arrived: escaped, names lowered, and bytes that are
        // not UTF-8 replaced as String(decoding:) replaces them, so the answer stays valid.
        var raw = ResponseHeaders()
        let pairs: [([UInt8], [UInt8])] = [
            (Array("X-Quote".utf8), Array("say \"hi\"\\ \u{01}".utf8)),
            (Array("X-Latin".utf8), [0x63, 0x61, 0x66, 0xE9]),                 // ISO-8859-1 "café"
            (Array("X-UTF8".utf8), Array("café".utf8)),
            (Array("X-Multi".utf8), [0xFF]), (Array("x-multi".utf8), Array("b".utf8)),
        ]
        for (name, value) in pairs {
            name.withUnsafeBufferPointer { n in value.withUnsafeBufferPointer { v in raw.append(name: n, value: v) } }
        }
        let line = RPCMessage.line(RPCMessage.result(id: .integer(1), ResponseFields.headers(raw)))
        let decoded = try JSONCodec.decode(Array(line.dropLast()))
        let headers = try XCTUnwrap(decoded.objectValue?["result"]?.objectValue)
        XCTAssertEqual(headers.keys, ["x-quote", "x-latin", "x-utf8", "x-multi"])
        XCTAssertEqual(headers["x-quote"], .string("say \"hi\"\\ \u{01}"))
        XCTAssertEqual(headers["x-latin"], .string("caf\u{FFFD}"))
        XCTAssertEqual(headers["x-utf8"], .string("café"))
        XCTAssertEqual(headers["x-multi"], .string("\u{FFFD}, b"))
    }

    func testManyHeadersAreGroupedTheSameWay() throws {
        // Past the pairwise limit the grouping goes through a dictionary: same names, order and joins.
        var many: [HTTPHeader] = []
        for i in 0..<(ResponseFields.pairwiseHeaderLimit * 40) {
            many.append(HTTPHeader(i % 3 == 0 ? "X-Repeat" : "X-Name-\(i)", "v\(i)"))
            if i % 50 == 0 { many.append(HTTPHeader("Set-Cookie", "c\(i)=1")) }
        }
        let grouped = try XCTUnwrap(ResponseFields.headers(ResponseHeaders(many)).objectValue)
        var expectedKeys: [String] = []
        for header in many where !expectedKeys.contains(header.name.lowercased()) { expectedKeys.append(header.name.lowercased()) }
        XCTAssertEqual(grouped.keys, expectedKeys)
        XCTAssertEqual(grouped["x-repeat"], .string(many.filter { $0.name == "X-Repeat" }.map(\.value).joined(separator: ", ")))
        XCTAssertEqual(grouped["set-cookie"], .string(many.filter { $0.name == "Set-Cookie" }.map(\.value).joined(separator: "\n")))
        XCTAssertEqual(grouped["x-name-1"], "v1")
    }
}
