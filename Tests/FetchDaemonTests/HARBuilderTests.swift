import FetchEngine
import Foundation
import JSONRPC
import XCTest

@testable import FetchDaemon

/// HAR 1.2 documents built from hand-made attempt records (no network).
final class HARBuilderTests: XCTestCase {
    private let started = Date(timeIntervalSince1970: 1_704_164_645.5)  // 2024-01-02T03:04:05.5Z
    private let mask = JSONValue.string(Redaction.mask)

    private func settings(bodies: Bool = true, maxBodyBytes: Int = 1 << 20, redact: Bool = true) -> HTTPLog.Settings {
        HTTPLog.Settings(enabled: true, directory: "/tmp/unused", bodies: bodies, maxBodyBytes: maxBodyBytes, redact: redact)
    }

    private func hop(_ url: String, _ method: String = "GET", status: Int, statusText: String = "OK",
                     request: [HTTPHeader] = [], response: [HTTPHeader] = []) -> ExchangeHop {
        var hop = ExchangeHop(url: url, method: method)
        hop.httpVersion = "HTTP/1.1"
        hop.status = status
        hop.statusText = statusText
        hop.requestHeaders = request
        hop.responseHeaders = response
        return hop
    }

    private func success(_ request: HTTPRequest, status: Int = 200, body: [UInt8] = [], hops: [ExchangeHop],
                         timings: TransferTimings = TransferTimings(), number: Int = 1) -> Job.AttemptRecord {
        var response = HTTPResponse(status: status, headers: ResponseHeaders(hops.last?.responseHeaders ?? []), url: hops.last?.url ?? request.url,
                                    body: body, redirects: max(0, hops.count - 1), httpVersion: "HTTP/1.1",
                                    timings: timings, sentBytes: 0, receivedBytes: Int64(body.count))
        response.exchange = hops
        return Job.AttemptRecord(number: number, startedAt: started, request: request, outcome: .success(response))
    }

    private func failure(_ request: HTTPRequest, _ kind: TransferError.Kind, _ detail: String, hops: [ExchangeHop] = [],
                         number: Int = 1) -> Job.AttemptRecord {
        var error = TransferError(kind, detail)
        error.exchange = hops
        return Job.AttemptRecord(number: number, startedAt: started, request: request, outcome: .failure(error))
    }

    private func build(_ records: [Job.AttemptRecord], settings: HTTPLog.Settings? = nil,
                       outcome: HARBuilder.JobOutcome = .succeeded, comment: String? = nil) -> JSONValue {
        HARBuilder(settings: settings ?? self.settings())
            .har(job: Job.Info(id: "job-7", comment: comment), records: records, outcome: outcome)
    }

    private func entries(_ har: JSONValue) -> [JSONValue] {
        har["log"]?["entries"]?.arrayValue ?? []
    }

    private func pairs(_ value: JSONValue?) -> [[String]] {
        (value?.arrayValue ?? []).map { [$0["name"]?.stringValue ?? "?", $0["value"]?.stringValue ?? "?"] }
    }

    // MARK: document

    func testLogHeaderAndComment() {
        let har = build([], outcome: .succeeded, comment: "nightly sync")
        XCTAssertEqual(har["log"]?["version"], "1.2")
        XCTAssertEqual(har["log"]?["creator"]?["name"], "fetchd")
        XCTAssertEqual(har["log"]?["creator"]?["version"]?.stringValue, FetchdVersion.text)
        XCTAssertEqual(har["log"]?["entries"], [])
        XCTAssertEqual(har["log"]?["comment"]?.stringValue, "fetchd job job-7: succeeded — nightly sync")
        XCTAssertEqual(build([], outcome: .failed("connect refused"))["log"]?["comment"]?.stringValue,
                       "fetchd job job-7: failed: connect refused")
        XCTAssertEqual(build([], outcome: .cancelled("disconnect"))["log"]?["comment"]?.stringValue,
                       "fetchd job job-7: cancelled by disconnect")
    }

    func testSimpleEntry() {
        let request = HTTPRequest(url: "http://h/p?a=1&b=two%20words")
        let h = hop(request.url, status: 200, request: [HTTPHeader("Host", "h"), HTTPHeader("Accept", "*/*")],
                    response: [HTTPHeader("Content-Type", "text/plain"), HTTPHeader("Content-Length", "5")])
        let e = entries(build([success(request, body: Array("hello".utf8), hops: [h])]))
        XCTAssertEqual(e.count, 1)
        let entry = e[0]
        XCTAssertEqual(entry["startedDateTime"]?.stringValue, "2024-01-02T03:04:05.500Z")
        XCTAssertEqual(entry["cache"], .object(JSONObject()))
        XCTAssertEqual(entry["request"]?["method"], "GET")
        XCTAssertEqual(entry["request"]?["url"], "http://h/p?a=1&b=two%20words")
        XCTAssertEqual(entry["request"]?["httpVersion"], "HTTP/1.1")
        XCTAssertEqual(pairs(entry["request"]?["headers"]), [["Host", "h"], ["Accept", "*/*"]])
        XCTAssertEqual(pairs(entry["request"]?["queryString"]), [["a", "1"], ["b", "two words"]])
        XCTAssertEqual(entry["request"]?["cookies"], [])
        XCTAssertEqual(entry["request"]?["headersSize"], -1)
        XCTAssertEqual(entry["request"]?["bodySize"], 0)
        XCTAssertNil(entry["request"]?["postData"])
        let response = entry["response"]
        XCTAssertEqual(response?["status"], 200)
        XCTAssertEqual(response?["statusText"], "OK")
        XCTAssertEqual(response?["redirectURL"], "")
        XCTAssertEqual(response?["bodySize"], 5)
        XCTAssertEqual(response?["content"], ["size": 5, "mimeType": "text/plain", "text": "hello"])
        XCTAssertNil(entry["_error"])
    }

    func testTimingsFromLibcurlPhases() {
        var t = TransferTimings()
        t.nameLookup = 1_000; t.connect = 3_000; t.preTransfer = 3_500; t.startTransfer = 10_000; t.total = 12_000
        let request = HTTPRequest(url: "http://h/")
        var entry = entries(build([success(request, hops: [hop(request.url, status: 200)], timings: t)]))[0]
        XCTAssertEqual(entry["timings"], ["blocked": -1, "dns": 1.0, "connect": 2.0, "ssl": -1, "send": 0.5,
                                          "wait": 6.5, "receive": 2.0])
        XCTAssertEqual(entry["time"]?.numberValue ?? 0, 12.0, accuracy: 0.0001, "time is the sum of the phases")

        t.tlsHandshake = 8_000; t.preTransfer = 8_200
        entry = entries(build([success(request, hops: [hop(request.url, status: 200)], timings: t)]))[0]
        XCTAssertEqual(entry["timings"]?["connect"]?.numberValue ?? 0, 7.0, accuracy: 0.0001, "connect includes ssl")
        XCTAssertEqual(entry["timings"]?["ssl"]?.numberValue ?? 0, 5.0, accuracy: 0.0001)
        XCTAssertEqual(entry["timings"]?["send"]?.numberValue ?? 0, 0.2, accuracy: 0.0001)
        XCTAssertEqual(entry["time"]?.numberValue ?? 0, 12.0, accuracy: 0.0001, "ssl is not counted twice")
    }

    // MARK: redirects and attempts

    func testOneEntryPerRedirectHop() {
        let request = HTTPRequest(method: "POST", url: "http://h/a", headers: [HTTPHeader("Content-Type", "text/plain")],
                                  body: .bytes(Array("payload".utf8)))
        let hops = [
            hop("http://h/a", "POST", status: 307, statusText: "Temporary Redirect", response: [HTTPHeader("Location", "/b")]),
            hop("http://h/b", "POST", status: 303, statusText: "See Other", response: [HTTPHeader("Location", "http://h/c")]),
            hop("http://h/c", "GET", status: 200, response: [HTTPHeader("Content-Type", "text/plain")]),
        ]
        let e = entries(build([success(request, body: Array("done".utf8), hops: hops)]))
        XCTAssertEqual(e.map { $0["response"]?["status"] }, [307, 303, 200])
        XCTAssertEqual(e.map { $0["request"]?["url"] }, ["http://h/a", "http://h/b", "http://h/c"])
        XCTAssertEqual(e.map { $0["response"]?["redirectURL"] }, ["/b", "http://h/c", ""])
        XCTAssertEqual(e.map { $0["request"]?["postData"]?["text"] }, ["payload", "payload", nil],
                       "the body goes with the hops that kept the method")
        XCTAssertNil(e[0]["response"]?["content"]?["text"], "only the last hop has the body")
        XCTAssertEqual(e[2]["response"]?["content"]?["text"], "done")
        XCTAssertEqual(e.map { $0["comment"]?.stringValue }, ["attempt 1, hop 1", "attempt 1, hop 2", "attempt 1, hop 3"])
    }

    func testRetriedJobHasOneEntryPerAttempt() {
        let request = HTTPRequest(url: "http://h/flaky")
        let busy = hop(request.url, status: 503, statusText: "Service Unavailable", response: [HTTPHeader("Retry-After", "0")])
        let records = [
            success(request, status: 503, body: Array("busy".utf8), hops: [busy], number: 1),
            failure(request, .reset, "Connection reset by peer", hops: [hop(request.url, status: 0, statusText: "")], number: 2),
            success(request, body: Array("ok".utf8), hops: [hop(request.url, status: 200)], number: 3),
        ]
        let e = entries(build(records))
        XCTAssertEqual(e.map { $0["response"]?["status"] }, [503, 0, 200])
        XCTAssertEqual(e.map { $0["_error"]?["kind"] }, [nil, "reset", nil])
        XCTAssertEqual(e[1]["_error"]?["detail"], "Connection reset by peer")
        XCTAssertEqual(e.map { $0["comment"]?.stringValue }, ["attempt 1, hop 1", "attempt 2, hop 1", "attempt 3, hop 1"])
    }

    func testFailureBeforeAnyByteStillHasAnEntry() {
        let request = HTTPRequest(url: "http://127.0.0.1:9/x", headers: [HTTPHeader("X-Mine", "1")])
        let e = entries(build([failure(request, .connect, "Failed to connect to 127.0.0.1 port 9")], outcome: .failed("connect")))
        XCTAssertEqual(e.count, 1)
        XCTAssertEqual(e[0]["request"]?["url"], "http://127.0.0.1:9/x")
        XCTAssertEqual(e[0]["request"]?["method"], "GET")
        XCTAssertEqual(pairs(e[0]["request"]?["headers"]), [["X-Mine", "1"]])
        XCTAssertEqual(e[0]["response"]?["status"], 0)
        XCTAssertEqual(e[0]["response"]?["bodySize"], -1)
        XCTAssertEqual(e[0]["response"]?["httpVersion"], "HTTP/1.1", "never empty")
        XCTAssertEqual(e[0]["_error"], ["kind": "connect", "detail": "Failed to connect to 127.0.0.1 port 9"])
    }

    // MARK: bodies

    func testBinaryBodyIsBase64() {
        let bytes: [UInt8] = [0x00, 0xff, 0xfe, 0x80, 0x41]
        let request = HTTPRequest(url: "http://h/bin")
        let h = hop(request.url, status: 200, response: [HTTPHeader("Content-Type", "application/octet-stream")])
        let content = entries(build([success(request, body: bytes, hops: [h])]))[0]["response"]?["content"]
        XCTAssertEqual(content?["encoding"], "base64")
        XCTAssertEqual(content?["text"]?.stringValue, Data(bytes).base64EncodedString())
        XCTAssertEqual(content?["size"], 5)
        XCTAssertEqual(content?["mimeType"], "application/octet-stream")
    }

    func testMaxBodyBytesAndBodiesOff() {
        let request = HTTPRequest(url: "http://h/")
        let h = hop(request.url, status: 200, response: [HTTPHeader("Content-Type", "text/plain")])
        let body = Array("0123456789".utf8)
        var content = entries(build([success(request, body: body, hops: [h])], settings: settings(maxBodyBytes: 4)))[0]["response"]?["content"]
        XCTAssertEqual(content?["text"], "0123")
        XCTAssertEqual(content?["size"], 10)
        XCTAssertEqual(content?["comment"], "the first 4 of 10 bytes")

        content = entries(build([success(request, body: body, hops: [h])], settings: settings(bodies: false)))[0]["response"]?["content"]
        XCTAssertNil(content?["text"])
        XCTAssertEqual(content?["size"], 10)
    }

    /// A UTF-8 text cut at maxBodyBytes inside a character is still text (cut at the
    /// character), not base64 of the whole prefix.
    func testTruncationInsideAUTF8CharacterStaysText() {
        let request = HTTPRequest(url: "http://h/")
        let h = hop(request.url, status: 200, response: [HTTPHeader("Content-Type", "text/plain; charset=utf-8")])
        let content = entries(build([success(request, body: Array("Grüße".utf8), hops: [h])],
                                    settings: settings(maxBodyBytes: 3)))[0]["response"]?["content"]
        XCTAssertNil(content?["encoding"], "\(String(describing: content))")
        XCTAssertEqual(content?["text"], "Gr")
    }

    func testJSONPostDataIsRedacted() {
        let request = HTTPRequest(method: "POST", url: "http://h/login", headers: [HTTPHeader("Content-Type", "application/json")],
                                  body: .bytes(Array(#"{"user":"bob","password":"hunter2pw"}"#.utf8)))
        let h = hop(request.url, "POST", status: 200, response: [HTTPHeader("Content-Type", "application/json")])
        let echo = Array(#"{"echo":"{\"user\":\"bob\",\"password\":\"hunter2pw\"}"}"#.utf8)
        let entry = entries(build([success(request, body: echo, hops: [h])]))[0]
        let post = entry["request"]?["postData"]
        XCTAssertEqual(post?["mimeType"], "application/json")
        XCTAssertEqual(try JSONCodec.decode(post?["text"]?.stringValue ?? ""), ["user": "bob", "password": mask])
        XCTAssertEqual(entry["request"]?["bodySize"], 37)
        let text = entry["response"]?["content"]?["text"]?.stringValue ?? ""
        XCTAssertFalse(text.contains("hunter2pw"), text)

        let raw = entries(build([success(request, body: echo, hops: [h])], settings: settings(redact: false)))[0]
        XCTAssertTrue(raw["request"]?["postData"]?["text"]?.stringValue?.contains("hunter2pw") ?? false)
        XCTAssertTrue(raw["response"]?["content"]?["text"]?.stringValue?.contains("hunter2pw") ?? false)
    }

    func testFormPostDataHasParams() {
        let request = HTTPRequest(method: "POST", url: "http://h/token",
                                  headers: [HTTPHeader("Content-Type", "application/x-www-form-urlencoded")],
                                  body: .bytes(Array("grant_type=client_credentials&client_secret=s3cr3tValue&note=a+b".utf8)))
        let post = entries(build([success(request, hops: [hop(request.url, "POST", status: 200)])]))[0]["request"]?["postData"]
        XCTAssertEqual(pairs(post?["params"]), [["grant_type", "client_credentials"], ["client_secret", Redaction.mask], ["note", "a b"]])
        XCTAssertFalse(post?["text"]?.stringValue?.contains("s3cr3tValue") ?? true, "\(String(describing: post))")
        XCTAssertTrue(post?["text"]?.stringValue?.hasPrefix("grant_type=client_credentials&client_secret=") ?? false)
    }

    func testMultipartPostDataHasParams() {
        let form = MultipartForm(parts: [
            .init(name: "file", filename: "a.txt", contentType: "text/plain", source: .file(path: "/data/a.txt")),
            .init(name: "inline", filename: "b.bin", contentType: "application/octet-stream", source: .bytes([1, 2, 3])),
            .init(name: "note", source: .bytes(Array("hello".utf8))),
            .init(name: "api_token", source: .bytes(Array("tok12345".utf8))),
        ])
        let request = HTTPRequest(method: "POST", url: "http://h/up", body: .multipart(form))
        let post = entries(build([success(request, hops: [hop(request.url, "POST", status: 200)])]))[0]["request"]?["postData"]
        XCTAssertEqual(post?["mimeType"], "multipart/form-data")
        let params = post?["params"]?.arrayValue ?? []
        XCTAssertEqual(params.map { $0["name"] }, ["file", "inline", "note", "api_token"])
        XCTAssertEqual(params[0]["fileName"], "a.txt")
        XCTAssertEqual(params[0]["contentType"], "text/plain")
        XCTAssertEqual(params[1]["fileName"], "b.bin")
        XCTAssertEqual(params[2]["value"], "hello")
        XCTAssertEqual(params[3]["value"], mask)
    }

    func testStreamedFileBody() {
        let request = HTTPRequest(method: "PUT", url: "http://h/f", body: .file(path: "/data/big.iso"))
        let entry = entries(build([success(request, hops: [hop(request.url, "PUT", status: 201)])]))[0]
        XCTAssertEqual(entry["request"]?["postData"]?["comment"], "streamed from /data/big.iso")
        XCTAssertEqual(entry["request"]?["postData"]?["text"], "")
        XCTAssertEqual(entry["request"]?["bodySize"], -1)
    }

    // MARK: redaction in the document

    func testHeadersCookiesAndURLAreRedacted() {
        let request = HTTPRequest(url: "http://h/p?access_token=tok123456&page=2#top",
                                  headers: [HTTPHeader("Authorization", "Bearer authVal999")])
        let sent = [HTTPHeader("Authorization", "Bearer authVal999"), HTTPHeader("Cookie", "sid=ck111111; lang=en")]
        let got = [HTTPHeader("Set-Cookie", "next=sc222222; Secure; HttpOnly"), HTTPHeader("X-Echo", "authVal999")]
        let entry = entries(build([success(request, hops: [hop(request.url, status: 200, request: sent, response: got)])]))[0]
        let req = entry["request"], resp = entry["response"]
        XCTAssertEqual(req?["url"], "http://h/p?access_token=%3Credacted%3E&page=2#top")
        XCTAssertEqual(pairs(req?["queryString"]), [["access_token", Redaction.mask], ["page", "2"]])
        XCTAssertEqual(pairs(req?["headers"]), [["Authorization", Redaction.mask], ["Cookie", Redaction.mask]])
        XCTAssertEqual(pairs(req?["cookies"]), [["sid", Redaction.mask], ["lang", Redaction.mask]])
        XCTAssertEqual(pairs(resp?["headers"]), [["Set-Cookie", Redaction.mask], ["X-Echo", Redaction.mask]])
        XCTAssertEqual(resp?["cookies"], [["name": "next", "value": mask, "httpOnly": true, "secure": true]])
        let whole = JSONCodec.encodeString(build([success(request, hops: [hop(request.url, status: 200, request: sent, response: got)])]))
        for secret in ["tok123456", "authVal999", "ck111111", "sc222222"] {
            XCTAssertFalse(whole.contains(secret), secret)
        }

        let raw = entries(build([success(request, hops: [hop(request.url, status: 200, request: sent, response: got)])],
                                settings: settings(redact: false)))[0]
        XCTAssertEqual(raw["request"]?["url"], "http://h/p?access_token=tok123456&page=2#top")
        XCTAssertEqual(pairs(raw["request"]?["cookies"]), [["sid", "ck111111"], ["lang", "en"]])
        XCTAssertEqual(raw["response"]?["cookies"]?.arrayValue?.first?["value"], "sc222222")
    }

    func testErrorDetailIsRedacted() {
        let request = HTTPRequest(url: "http://h/?api_key=leakyKey42")
        let entry = entries(build([failure(request, .other, "bad URL http://h/?api_key=leakyKey42")]))[0]
        XCTAssertEqual(entry["_error"]?["detail"]?.stringValue, "bad URL http://h/?api_key=\(URLRedaction.encodedMask)")
    }

    // MARK: files

    func testFileNameIsUTCWithMillisecondsAndASafeJobID() {
        XCTAssertEqual(HTTPLog.fileName(finishedAt: started, jobID: "job-1"), "20240102-030405.500-job-1.har")
        XCTAssertEqual(HTTPLog.fileName(finishedAt: started, jobID: "../a b/c"), "20240102-030405.500-.._a_b_c.har")
    }

    func testDirectoryAndFileModes() throws {
        let base = NSTemporaryDirectory() + "har-tests-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: base) }
        let dir = base + "/a/b"
        try HTTPLog.makeDirectory(dir)
        var info = stat()
        XCTAssertEqual(stat(dir, &info), 0)
        XCTAssertEqual(info.st_mode & 0o777, 0o700)
        try HTTPLog.writeAtomically(Array("{}".utf8), to: dir + "/x.har")
        XCTAssertEqual(stat(dir + "/x.har", &info), 0)
        XCTAssertEqual(info.st_mode & 0o777, 0o600)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: dir), ["x.har"], "no temporary file left")
        XCTAssertThrowsError(try HTTPLog.makeDirectory(dir + "/x.har/sub"))
    }
}
