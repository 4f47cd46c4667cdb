import FetchEngine
import FoundationEssentials
import JSONRPC
import XCTest

@testable import FetchDaemon

/// The pure parts of stubs: matching, what differs from the nearest stub, sequences, times,
/// priority, the kept misses, and addStub's checks. No I/O, no clock.
final class StubTests: XCTestCase {
    let anyFile = FilePolicy(allowedDirectories: [])

    /// The params, in set "s" unless they name one.
    private func params(_ json: String) throws -> StubParams {
        var p = try StubParams(JSONCodec.decode(json), policy: anyFile)
        if p.set == "default" { p.set = "s" }
        return p
    }

    private func match(_ json: String) throws -> StubMatch {
        try params(#"{"match": \#(json), "respond": {}}"#).match
    }

    private func field(of error: any Error) -> String? {
        (error as? RPCError)?.data?["field"]?.stringValue
    }

    private let get = StubRequest(method: "GET", url: "http://api.test/v1/items?page=2&q=a%20b", headers: [HTTPHeader("X-Token", "t1")])

    func testEveryMemberGivenMustHold() throws {
        XCTAssertTrue(try match("{}").matches(get))
        XCTAssertTrue(try match(#"{"method": "get"}"#).matches(get), "methods compare without case")
        XCTAssertFalse(try match(#"{"method": "POST"}"#).matches(get))
        XCTAssertFalse(try match(#"{"url": "http://api.test/v1/items"}"#).matches(get), "url is exact, query included")
        XCTAssertTrue(try match(#"{"url": "http://api.test/v1/items?page=2&q=a%20b"}"#).matches(get))
        XCTAssertFalse(try match(#"{"url": "http://api.test/v1/items?page=3"}"#).matches(get))
        XCTAssertFalse(try match(#"{"url": "http://api.test/v1/item"}"#).matches(get))
        XCTAssertTrue(try match(#"{"urlPrefix": "http://api.test/v1/"}"#).matches(get))
        XCTAssertFalse(try match(#"{"urlPrefix": "http://api.test/v2/"}"#).matches(get))
        XCTAssertTrue(try match(#"{"urlPattern": "^http://api\\.test/v[0-9]+/items(\\?|$)"}"#).matches(get))
        XCTAssertFalse(try match(#"{"urlPattern": "^https://"}"#).matches(get))
        XCTAssertTrue(try match(#"{"query": {"page": "2", "q": "a b"}}"#).matches(get), "query values are decoded")
        XCTAssertFalse(try match(#"{"query": {"page": "1"}}"#).matches(get))
        XCTAssertTrue(try match(#"{"headers": {"x-token": "t1"}}"#).matches(get), "header names compare without case")
        XCTAssertFalse(try match(#"{"headers": {"X-Token": "T1"}}"#).matches(get), "header values are exact")
    }

    func testBodies() throws {
        let post = StubRequest(method: "POST", url: "http://h/x", body: Array(#"{"b": [1, 2.0], "a": "x"}"#.utf8))
        XCTAssertTrue(try match(#"{"bodyJson": {"a": "x", "b": [1.0, 2]}}"#).matches(post), "members in any order, 1 == 1.0")
        XCTAssertFalse(try match(#"{"bodyJson": {"a": "x"}}"#).matches(post))
        XCTAssertTrue(try match(#"{"bodyContains": "\"a\": \"x\""}"#).matches(post))
        XCTAssertFalse(try match(#"{"bodyContains": "zzz"}"#).matches(post))
        let file = StubRequest(method: "POST", url: "http://h/x", body: nil)
        XCTAssertFalse(try match(#"{"bodyContains": ""}"#).matches(file), "a body not in memory never matches a body rule")
        XCTAssertFalse(try match(#"{"bodyJson": null}"#).matches(StubRequest(method: "POST", url: "http://h/x", body: Array("nope".utf8))))
    }

    func testDifferencesNameEachMember() throws {
        let m = try match(#"{"method": "POST", "url": "http://api.test/v2/items", "query": {"page": "2", "x": "1"}, "headers": {"X-Token": "no"}, "bodyContains": "z"}"#)
        XCTAssertEqual(m.differences(get), ["method", "url", "query.x", "headers.X-Token", "body"])
        XCTAssertEqual(m.differences(get, all: false), ["method"])
    }

    func testNearestIsTheStubWithFewestDifferences() throws {
        let store = StubStore()
        let far = try params(#"{"match": {"method": "POST", "url": "http://other/"}, "respond": {}}"#)
        let near = try params(#"{"match": {"method": "GET", "urlPrefix": "http://api.test/v1/items", "headers": {"X-Token": "t2"}}, "respond": {}}"#)
        _ = try store.add(far)
        let nearID = try store.add(near)
        guard case .miss(let miss) = store.decide(set: "s", get) else { return XCTFail("expected a miss") }
        XCTAssertEqual(miss.nearest?.stubID, nearID)
        XCTAssertEqual(miss.nearest?.differences, ["headers.X-Token"])
        XCTAssertEqual(miss.nearestJSON, ["stubId": .string(nearID), "differences": ["headers.X-Token"]])
        guard case .miss(let empty) = store.decide(set: "unknown", get) else { return XCTFail("expected a miss") }
        XCTAssertNil(empty.nearest)
        XCTAssertEqual(empty.nearestJSON, .null)
    }

    private func status(_ decision: StubStore.Decision) -> Int? {
        guard case .answer(.respond(let response), _) = decision else { return nil }
        return response.status
    }

    func testSequenceAnswersInOrderAndTheLastRepeats() throws {
        let store = StubStore()
        let p = try params(#"{"respondSequence": [{"status": 503}, {"status": 503}, {"status": 200}]}"#)
        _ = try store.add(p)
        XCTAssertEqual((0..<5).map { _ in status(store.decide(set: "s", get)) }, [503, 503, 200, 200, 200])
        XCTAssertEqual(store.snapshot(set: "s").stubs.first?.hits, 5)
    }

    func testTimesUsesAStubUpThenTheNextAnswers() throws {
        let store = StubStore()
        let once = try params(#"{"respond": {"status": 201}, "times": 2, "priority": 5}"#)
        let always = try params(#"{"respond": {"status": 200}}"#)
        _ = try store.add(always)
        let onceID = try store.add(once)
        XCTAssertEqual((0..<4).map { _ in status(store.decide(set: "s", get)) }, [201, 201, 200, 200],
                       "the higher priority answers first, twice")
        XCTAssertEqual(store.remove(set: "s", stubID: store.snapshot(set: "s").stubs.last?.id), 1)
        guard case .miss(let miss) = store.decide(set: "s", get) else { return XCTFail("expected a miss") }
        XCTAssertEqual(miss.nearest?.stubID, onceID)
        XCTAssertEqual(miss.nearest?.differences, ["times"], "a used-up stub is near, differing in times")
    }

    func testEqualPrioritiesKeepTheirOrder() throws {
        let store = StubStore()
        for code in [201, 202] {
            let p = try params(#"{"respond": {"status": \#(code)}}"#)
            _ = try store.add(p)
        }
        XCTAssertEqual(status(store.decide(set: "s", get)), 201)
        let low = try params(#"{"respond": {"status": 299}, "priority": -1}"#)
        _ = try store.add(low)
        XCTAssertEqual(store.snapshot(set: "s").stubs.map { $0.nextAnswer.status }, [201, 202, 299])
    }

    func testSetsAreSeparateAndModes() throws {
        let store = StubStore()
        let p = try params(#"{"respond": {}}"#)
        var inA = p
        inA.set = "a"
        _ = try store.add(inA)
        XCTAssertNotNil(status(store.decide(set: "a", get)))
        guard case .miss = store.decide(set: "b", get) else { return XCTFail("another set's stubs never answer") }
        store.setMode(.network, for: "b")
        guard case .network = store.decide(set: "b", get) else { return XCTFail("onMiss network") }
        let offline = StubStore(offline: true)
        offline.setMode(.network, for: "b")
        guard case .miss = offline.decide(set: "b", get) else { return XCTFail("--offline: every miss is an error") }
        XCTAssertEqual(offline.implicitSet, "default")
        XCTAssertNil(store.implicitSet)
    }

    func testTheLast100MissesAreKept() {
        let store = StubStore()
        for i in 0..<150 { _ = store.decide(set: "s", StubRequest(method: "GET", url: "http://h/\(i)")) }
        let misses = store.snapshot(set: nil).misses
        XCTAssertEqual(misses.count, StubStore.keptMisses)
        XCTAssertEqual(misses.first?.url, "http://h/50")
        XCTAssertEqual(misses.last?.url, "http://h/149")
    }

    func testASetIsBounded() throws {
        let store = StubStore()
        let p = try params(#"{"respond": {}}"#)
        let drafts = Array(repeating: p, count: StubStore.maxPerSet)
        XCTAssertEqual(try store.addAll(set: "s", drafts).count, StubStore.maxPerSet)
        XCTAssertThrowsError(try store.add(p)) {
            XCTAssertEqual(($0 as? RPCError)?.code, .overloaded)
        }
    }

    func testTheBodiesOfAllStubsAreBounded() throws {
        let store = StubStore(maxBodyBytes: 1000)
        var big = try params(#"{"respond": {}}"#)
        big.answers = [.respond(StubResponse(body: [UInt8](repeating: 1, count: 500)))]
        let first = try store.add(big)
        _ = try store.add(big)
        XCTAssertEqual(store.heldBodyBytes, 1000)
        XCTAssertThrowsError(try store.add(big)) { XCTAssertEqual(($0 as? RPCError)?.code, .overloaded) }
        XCTAssertEqual(store.remove(set: nil, stubID: first), 1)
        XCTAssertEqual(store.heldBodyBytes, 500, "a removed stub gives its bytes back")
        XCTAssertNoThrow(try store.add(big))
    }

    func testBadStubsNameTheirField() {
        let cases: [(String, String)] = [
            (#"{"match": {"urlPattern": "a("}, "respond": {}}"#, "match.urlPattern"),
            (#"{"match": {"url": "a", "urlPrefix": "b"}, "respond": {}}"#, "match.urlPrefix"),
            (#"{"match": {"headers": {"a": 1}}, "respond": {}}"#, "match.headers.a"),
            (#"{"match": {"nope": 1}, "respond": {}}"#, "match.nope"),
            (#"{"respond": {"bodyFile": "/nonexistent/stub-body"}}"#, "respond.bodyFile"),
            (#"{"respond": {"bodyBase64": "%%%"}}"#, "respond.bodyBase64"),
            (#"{"respond": {"status": 42}}"#, "respond.status"),
            (#"{"respond": {"headers": {"X": "a\nb"}}}"#, "respond.headers.X"),
            (#"{"respond": {"body": "a", "json": 1}}"#, "respond.json"),
            (#"{"respondSequence": [{}, {"delayMs": -1}]}"#, "respondSequence[1].delayMs"),
            (#"{"respondSequence": []}"#, "respondSequence"),
            (#"{"fault": "explode"}"#, "fault"),
            (#"{}"#, "respond"),
            (#"{"respond": {}, "fault": "reset"}"#, "fault"),
            (#"{"respond": {}, "times": 0}"#, "times"),
        ]
        for (json, expected) in cases {
            XCTAssertThrowsError(try params(json), json) { XCTAssertEqual(field(of: $0), expected, json) }
        }
    }

    func testAnswersAreMadeAsATransferWouldMakeThem() throws {
        let p = try params(#"{"respond": {"status": 201, "json": {"ok": true}, "headers": {"X-A": "1"}}}"#)
        guard case .success(let response) = StubStage.outcome(p.answers[0], HTTPRequest(url: "http://h/x")) else { return XCTFail() }
        XCTAssertEqual(response.status, 201)
        XCTAssertEqual(String(decoding: response.body, as: UTF8.self), #"{"ok":true}"#)
        XCTAssertEqual(response.headers, [HTTPHeader("X-A", "1"), HTTPHeader("Content-Type", "application/json")])
        XCTAssertEqual(response.url, "http://h/x")
        var small = HTTPRequest(url: "http://h/x")
        small.maxBodyBytes = 3
        guard case .failure(let error) = StubStage.outcome(p.answers[0], small) else { return XCTFail() }
        XCTAssertEqual(error.kind, .bodyTooLarge)
        for (fault, kind) in [("reset", TransferError.Kind.reset), ("timeout", .timeout), ("refused", .connect)] {
            let f = try params(#"{"fault": "\#(fault)"}"#)
            guard case .failure(let error) = StubStage.outcome(f.answers[0], small) else { return XCTFail(fault) }
            XCTAssertEqual(error.kind, kind, fault)
        }
    }
}

extension StubTests {
    func testRedirectsAreFollowedThroughTheSet() throws {
        let store = StubStore()
        for json in [#"{"match": {"url": "http://h/a"}, "respond": {"status": 302, "headers": {"Location": "/b?x=1"}}}"#,
                     #"{"match": {"method": "GET", "url": "http://h/b?x=1"}, "respond": {"status": 200, "body": "at b"}}"#,
                     #"{"match": {"url": "http://h/loop"}, "respond": {"status": 307, "headers": {"Location": "http://h/loop"}}}"#,
                     #"{"match": {"url": "http://h/lost"}, "respond": {"status": 301, "headers": {"Location": "http://h/nowhere"}}}"#] {
            _ = try store.add(try params(json))
        }
        func follow(_ url: String, method: String = "GET", maxRedirects: Int = 10) -> Substitute.Made {
            var request = HTTPRequest(method: method, url: url, body: method == "POST" ? .bytes(Array("x".utf8)) : .none, maxRedirects: maxRedirects)
            request.cookieJar = nil
            guard case .answer(let answer, _) = store.decide(set: "s", StubRequest(request)) else { return Substitute.Made(outcome: .failure(TransferError(.other, "no first stub"))) }
            return StubStage.following(answer, request, set: "s", stubs: store).0
        }
        guard case .success(let response) = follow("http://h/a", method: "POST").outcome else { return XCTFail("POST /a") }
        var first = HTTPRequest(method: "GET", url: "http://h/a")
        first.cookieJar = nil
        guard case .answer(let answer, _) = store.decide(set: "s", StubRequest(first)) else { return XCTFail("GET /a") }
        XCTAssertEqual(StubStage.following(answer, first, set: "s", stubs: store).lastStub, "stub-2",
                       "the stub that answered the last hop")
        XCTAssertEqual([String(response.status), response.url, String(response.redirects)], ["200", "http://h/b?x=1", "1"],
                       "a 302 to a POST goes on as GET")
        XCTAssertEqual(String(decoding: response.body, as: UTF8.self), "at b")
        guard case .success(let unfollowed) = follow("http://h/a", maxRedirects: 0).outcome else { return XCTFail() }
        XCTAssertEqual(unfollowed.status, 302, "maxRedirects 0: the 3xx is the answer")
        guard case .failure(let loop) = follow("http://h/loop", maxRedirects: 3).outcome else { return XCTFail() }
        XCTAssertEqual(loop.kind, .tooManyRedirects)
        let lost = follow("http://h/lost")
        guard case .failure(let missed) = lost.outcome else { return XCTFail() }
        XCTAssertEqual(missed.kind, .stubMiss)
        XCTAssertNotNil(lost.failureData?["nearest"], "a hop that misses names its nearest stub")
    }
}

/// A HAR file as stubs, and a stub's Set-Cookie as the jar takes it: pure.
final class HARStubsAndCookiesTests: XCTestCase {
    private func entry(_ method: String, _ url: String, _ status: Int, _ text: String = "", post: String? = nil,
                       headers: [(String, String)] = []) -> JSONValue {
        var request: JSONObject = ["method": .string(method), "url": .string(url)]
        if let post { request["postData"] = ["text": .string(post)] }
        let headerList: [JSONValue] = headers.map { ["name": .string($0.0), "value": .string($0.1)] }
        return ["request": .object(request),
                "response": ["status": JSONValue(status), "headers": .array(headerList), "content": ["text": .string(text)]]]
    }

    private func har(_ entries: [JSONValue]) -> JSONValue { ["log": ["entries": .array(entries)]] }

    func testIdenticalRequestsBecomeOneSequenceInTheFilesOrder() throws {
        let stubs = try HARStubs.stubs(from: har([
            entry("GET", "http://h/a", 503, "busy", headers: [("Content-Length", "4"), ("X-A", "1")]),
            entry("GET", "http://h/a?x=1", 200, "x"),
            entry("GET", "http://h/a", 200, "ok"),
            entry("POST", "http://h/a", 201, post: "n=1"),
            entry("GET", "http://h/gone", 0),
        ]), set: "s")
        XCTAssertEqual(stubs.count, 3)
        XCTAssertEqual(stubs[0].answers.map(\.status), [503, 200])
        guard case .respond(let first) = stubs[0].answers[0] else { return XCTFail() }
        XCTAssertEqual(first.headers, [HTTPHeader("X-A", "1")], "wire headers are not replayed")
        XCTAssertEqual(String(decoding: first.body, as: UTF8.self), "busy")
        XCTAssertTrue(stubs[0].match.matches(StubRequest(method: "GET", url: "http://h/a")))
        XCTAssertFalse(stubs[0].match.matches(StubRequest(method: "GET", url: "http://h/a?x=1")))
        XCTAssertEqual(stubs[2].match.given, ["method": "POST", "url": "http://h/a", "bodyContains": "n=1"])
    }

    func testNotHARIsRefusedWithTheEntry() {
        for (doc, needle) in [(JSONValue.array([]), "log.entries"), (har([["request": [:]]]), "log.entries[0].request"),
                              (har([entry("GET", "http://h/", 700)]), "log.entries[0].response.status")] {
            XCTAssertThrowsError(try HARStubs.stubs(from: doc, set: "s")) { error in
                XCTAssertTrue((error as? HARStubs.Invalid)?.reason.contains(needle) ?? false, "\(error)")
            }
        }
    }

    func testSetCookieAsTheJarTakesIt() {
        let now = Date(timeIntervalSince1970: 1_000_000)
        let headers = [HTTPHeader("Set-Cookie", "a=1"), HTTPHeader("set-cookie", "b=2; Domain=.example.com; Path=/x; Max-Age=60; Secure; HttpOnly"),
                       HTTPHeader("Set-Cookie", "c=3; Domain=other.org"), HTTPHeader("Set-Cookie", "d=4; Max-Age=0"), HTTPHeader("X", "y")]
        let cookies = StubCookies.cookies(from: headers, url: "https://api.example.com/v1/items", now: now)
        XCTAssertEqual(cookies.map(\.name), ["a", "b", "d"], "a Domain that does not cover the host drops the cookie")
        XCTAssertEqual(cookies[0].domain, "api.example.com")
        XCTAssertTrue(cookies[0].hostOnly)
        XCTAssertEqual(cookies[0].path, "/v1")
        XCTAssertNil(cookies[0].expires)
        XCTAssertEqual(cookies[1].domain, "example.com")
        XCTAssertFalse(cookies[1].hostOnly)
        XCTAssertEqual(cookies[1].path, "/x")
        XCTAssertEqual(cookies[1].expires, 1_000_060)
        XCTAssertTrue(cookies[1].secure && cookies[1].httpOnly)
        XCTAssertTrue(cookies[2].isExpired(now: 1_000_000), "Max-Age=0 deletes")
    }
}

extension StubAnswer {
    var status: Int? {
        if case .respond(let response) = self { return response.status }
        return nil
    }
}
