import FetchEngine
import JSONRPC
import XCTest

@testable import FetchDaemon

/// The pure parts of auth rules: host patterns, the single flight and expiry of a rule's
/// credential on a moved clock, the token answer, and HTTP log masking of rule secrets.
final class AuthTests: XCTestCase {
    // MARK: host patterns

    func testHostPatterns() throws {
        let name = try XCTUnwrap(AuthHostPattern("API.Example.com"))
        XCTAssertEqual(name.description, "api.example.com")
        XCTAssertTrue(name.matches(name: "api.example.com", port: 443))
        XCTAssertTrue(name.matches(name: "api.example.com", port: 8080), "a name covers every port")
        XCTAssertFalse(name.matches(name: "x.api.example.com", port: 443))

        let port = try XCTUnwrap(AuthHostPattern("127.0.0.1:8080"))
        XCTAssertTrue(port.matches(name: "127.0.0.1", port: 8080))
        XCTAssertFalse(port.matches(name: "127.0.0.1", port: 8081))

        let sub = try XCTUnwrap(AuthHostPattern("*.example.com"))
        XCTAssertTrue(sub.matches(name: "a.example.com", port: 443))
        XCTAssertTrue(sub.matches(name: "a.b.example.com", port: 80))
        XCTAssertFalse(sub.matches(name: "example.com", port: 443), "subdomains only")
        XCTAssertFalse(sub.matches(name: "badexample.com", port: 443))

        for bad in ["*", "", "*.", "a b", "host:0", "host:99999", "*.x:80", "a/b", "*.*.x"] {
            XCTAssertNil(AuthHostPattern(bad), bad)
        }
        XCTAssertGreaterThan(port.precedence, name.precedence)
        XCTAssertGreaterThan(name.precedence, sub.precedence)
        XCTAssertGreaterThan(AuthHostPattern("*.b.example.com")!.precedence, sub.precedence)
    }

    func testTheMostSpecificRuleWins() throws {
        let store = CredentialStore(now: { 0 }) { _, _, _ in XCTFail("nothing to fetch") }
        for (host, token) in [("*.example.com", "sub"), ("api.example.com", "name"), ("api.example.com:8443", "port"),
                              ("*.b.example.com", "deeper")] {
            store.set(AuthRule(host: AuthHostPattern(host)!, kind: .bearer(token: .inline(token))))
        }
        func token(_ name: String, _ port: Int) -> String? {
            guard let match = store.match(name: name, port: port), case .bearer(.inline(let t)) = match.rule.kind else { return nil }
            return t
        }
        XCTAssertEqual(token("api.example.com", 8443), "port")
        XCTAssertEqual(token("api.example.com", 443), "name")
        XCTAssertEqual(token("www.example.com", 443), "sub")
        XCTAssertEqual(token("a.b.example.com", 443), "deeper")
        XCTAssertNil(token("example.com", 443))
        XCTAssertNil(token("other.org", 443))
        // Replacing keeps one rule per pattern; removing leaves the others.
        store.set(AuthRule(host: AuthHostPattern("api.example.com")!, kind: .bearer(token: .inline("name2"))))
        XCTAssertEqual(token("api.example.com", 443), "name2")
        XCTAssertEqual(store.status().count, 4)
        XCTAssertTrue(store.remove(AuthHostPattern("api.example.com")!))
        XCTAssertFalse(store.remove(AuthHostPattern("api.example.com")!))
        XCTAssertEqual(token("api.example.com", 443), "sub")
    }

    // MARK: single flight and expiry

    private func token(_ text: String, until: Double?) -> Credential {
        var credential = Credential.bearer(text)
        credential.usableUntil = until
        credential.expiresAt = until
        return credential
    }

    func testOneFetchForManyWaiters() {
        var cache = CredentialCache<Int>()
        var starts = 0
        for id in 0..<100 {
            guard case .wait(let start) = cache.lookup(now: 0, id: UInt64(id), waiter: id) else { return XCTFail("no credential yet") }
            if start { starts += 1 }
        }
        XCTAssertEqual(starts, 1, "the first waiter starts the one fetch")
        XCTAssertEqual(cache.waiting, 100)
        let (waiters, generation) = cache.fetched(.success(token("t1", until: 100)))
        XCTAssertEqual(waiters.sorted(), Array(0..<100), "every waiter shares its result")
        XCTAssertEqual(generation, 1)
        XCTAssertEqual(cache.waiting, 0)
        guard case .ready(let held, 1) = cache.lookup(now: 50, id: 1000, waiter: 1000) else { return XCTFail("held") }
        XCTAssertEqual(held.headers, [HTTPHeader("Authorization", "Bearer t1")])
    }

    func testExpiryOnTheClock() {
        var cache = CredentialCache<Int>()
        _ = cache.lookup(now: 0, id: 1, waiter: 1)
        _ = cache.fetched(.success(token("t1", until: 100)))
        XCTAssertNotNil(cache.usable(now: 99.9))
        XCTAssertNil(cache.usable(now: 100), "not used at or after usableUntil")
        guard case .wait(true) = cache.lookup(now: 100, id: 2, waiter: 2) else { return XCTFail("expired: a new fetch") }
        _ = cache.fetched(.success(token("t2", until: nil)))
        XCTAssertNotNil(cache.usable(now: 1e9), "no expiry: kept until a 401")
    }

    func testAFailureReachesEveryWaiterAndIsShown() {
        var cache = CredentialCache<Int>()
        _ = cache.lookup(now: 0, id: 1, waiter: 1)
        _ = cache.lookup(now: 0, id: 2, waiter: 2)
        let (waiters, _) = cache.fetched(.failure(AuthProblem("the token endpoint answered 401")))
        XCTAssertEqual(waiters, [1, 2])
        XCTAssertEqual(cache.lastError, "the token endpoint answered 401")
        XCTAssertNil(cache.held)
        guard case .wait(true) = cache.lookup(now: 1, id: 3, waiter: 3) else { return XCTFail("the next request tries again") }
        _ = cache.fetched(.success(token("t", until: nil)))
        XCTAssertNil(cache.lastError, "a success clears it")
    }

    func testA401DropsOnlyTheCredentialItCarried() {
        var cache = CredentialCache<Int>()
        _ = cache.lookup(now: 0, id: 1, waiter: 1)
        _ = cache.fetched(.success(token("t1", until: nil)))
        XCTAssertTrue(cache.drop(generation: 1))
        _ = cache.lookup(now: 0, id: 2, waiter: 2)
        _ = cache.fetched(.success(token("t2", until: nil)))
        XCTAssertFalse(cache.drop(generation: 1), "a late 401 to the old token keeps the new one")
        XCTAssertNotNil(cache.usable(now: 0))
    }

    func testAUseOnceCredentialIsNotKept() {
        var cache = CredentialCache<Int>()
        _ = cache.lookup(now: 0, id: 1, waiter: 1)
        _ = cache.lookup(now: 0, id: 2, waiter: 2)
        let (waiters, _) = cache.fetched(.success(Credential.bearer("from-file", kept: false)))
        XCTAssertEqual(waiters, [1, 2], "the requests that waited share the read")
        guard case .wait(true) = cache.lookup(now: 0, id: 3, waiter: 3) else { return XCTFail("the next request reads again") }
    }

    func testACancelledWaiterIsNotResumed() {
        var cache = CredentialCache<Int>()
        _ = cache.lookup(now: 0, id: 1, waiter: 1)
        _ = cache.lookup(now: 0, id: 2, waiter: 2)
        XCTAssertEqual(cache.cancel(id: 1), 1)
        XCTAssertNil(cache.cancel(id: 1))
        XCTAssertEqual(cache.fetched(.success(token("t", until: nil))).waiters, [2])
    }

    /// A helper's own words (its stderr line) go to the request that ran it, not to the
    /// requests that only waited for it, nor to getAuth.
    func testAHelpersWordsGoToTheRequestThatRanIt() throws {
        let pending = Locked<[@Sendable (Result<Credential, AuthProblem>) -> Void]>([])
        let store = CredentialStore(now: { 0 }) { _, _, done in pending.withLock { $0.append(done) } }
        let grant = OAuth2Grant(tokenURL: "http://127.0.0.1:1/token", clientID: "id", clientSecret: .inline("s"))
        store.set(AuthRule(host: AuthHostPattern("api.test")!, kind: .oauth2(grant)))
        let match = try XCTUnwrap(store.match(name: "api.test", port: 443))
        let told = Locked<[UInt64: String]>([:])
        for id: UInt64 in [7, 8, 9] {
            store.wait(match, id: id, for: CredentialRequest(url: "https://api.test/", method: "GET", host: "api.test:443",
                                                             challenge: nil)) { result in
                if case .failure(let problem as AuthProblem) = result { told.withLock { $0[id] = problem.detail } }
            }
        }
        let done = try XCTUnwrap(pending.withLock { $0.first })
        done(.failure(AuthProblem("the helper exited with status 1", helperSaid: "no login: run gh auth login")))
        XCTAssertEqual(told.withLock { $0 }, [7: "the helper exited with status 1: no login: run gh auth login",
                                              8: "the helper exited with status 1", 9: "the helper exited with status 1"])
        XCTAssertEqual(store.status().first?.lastError, "the helper exited with status 1")
    }

    /// The store with a fetch the test ends by hand: one fetch for concurrent waiters.
    func testTheStoreFetchesOncePerRule() throws {
        let pending = Locked<[@Sendable (Result<Credential, AuthProblem>) -> Void]>([])
        let clock = Locked(0.0)
        let store = CredentialStore(now: { clock.withLock { $0 } }) { _, _, done in pending.withLock { $0.append(done) } }
        let grant = OAuth2Grant(tokenURL: "http://127.0.0.1:1/token", clientID: "id", clientSecret: .inline("s"))
        store.set(AuthRule(host: AuthHostPattern("api.test")!, kind: .oauth2(grant)))
        let match = try XCTUnwrap(store.match(name: "api.test", port: 443))
        XCTAssertNil(store.ready(match))
        let got = Locked<[String]>([])
        for id in 0..<10 {
            store.wait(match, id: UInt64(id), for: CredentialRequest(url: "https://api.test/", method: "GET", host: "api.test:443", challenge: nil)) { result in
                got.withLock { $0.append((try? result.get().0.headers.first?.value) ?? "failed") }
            }
        }
        XCTAssertEqual(pending.withLock { $0.count }, 1)
        XCTAssertEqual(store.status().first?.hasCredential, false)
        var credential = Credential.bearer("tok")
        credential.usableUntil = 30
        credential.expiresAt = 60
        pending.withLock { $0[0] }(.success(credential))
        XCTAssertEqual(got.withLock { $0 }, Array(repeating: "Bearer tok", count: 10))
        XCTAssertNotNil(store.ready(match))
        let status = try XCTUnwrap(store.status().first)
        XCTAssertTrue(status.hasCredential)
        XCTAssertEqual(status.expiresIn, 60)
        clock.withLock { $0 = 30 }
        XCTAssertNil(store.ready(match), "refreshed from usableUntil on")
    }

    // MARK: the token answer

    private let grant = OAuth2Grant(tokenURL: "http://127.0.0.1:1/token", clientID: "my id", clientSecret: .inline("s&cret"),
                                    scope: "read write")

    func testTokenRequest() throws {
        let request = OAuth2Token.request(grant, clientSecret: "s&cret")
        XCTAssertEqual(request.method, "POST")
        XCTAssertEqual(request.maxRedirects, 0)
        guard case .bytes(let body) = request.body else { return XCTFail("a form body") }
        XCTAssertEqual(String(decoding: body, as: UTF8.self), "grant_type=client_credentials&scope=read+write")
        let basic = try XCTUnwrap(request.header(named: "Authorization"))
        XCTAssertEqual(basic, "Basic " + Data("my+id:s%26cret".utf8).base64EncodedString())
    }

    func testTokenAnswers() throws {
        func answer(_ status: Int, _ json: String, now: Double = 1000) -> Result<Credential, AuthProblem> {
            OAuth2Token.credential(status: status, body: Array(json.utf8), grant: grant, now: now)
        }
        let ok = try answer(200, #"{"access_token":"abc","token_type":"Bearer","expires_in":3600}"#).get()
        XCTAssertEqual(ok.headers, [HTTPHeader("Authorization", "Bearer abc")])
        XCTAssertEqual(ok.expiresAt, 4600)
        XCTAssertEqual(ok.usableUntil, 4540, "60 s before expiry by default")
        let short = try answer(200, #"{"access_token":"abc","expires_in":"20"}"#).get()
        XCTAssertEqual(short.usableUntil, 1010, "half the lifetime when that is shorter than 60 s")
        let forever = try answer(200, #"{"access_token":"abc"}"#).get()
        XCTAssertNil(forever.usableUntil, "no expires_in: kept until a 401")
        let custom = OAuth2Grant(tokenURL: grant.tokenURL, clientID: "i", clientSecret: .inline("s"), refreshBefore: 300)
        let early = try OAuth2Token.credential(status: 200, body: Array(#"{"access_token":"a","expires_in":3600}"#.utf8),
                                               grant: custom, now: 0).get()
        XCTAssertEqual(early.usableUntil, 3300)

        XCTAssertEqual(answer(401, #"{"error":"invalid_client","error_description":"secret s&cret wrong"}"#),
                       .failure(AuthProblem("the token endpoint answered 401 (invalid_client)")), "never the body's text")
        XCTAssertEqual(answer(500, "oops"), .failure(AuthProblem("the token endpoint answered 500")))
        XCTAssertEqual(answer(200, "not json"), .failure(AuthProblem("the token endpoint's answer is not a JSON object")))
        XCTAssertEqual(answer(200, #"{"token_type":"bearer"}"#),
                       .failure(AuthProblem("the token endpoint's answer has no usable access_token")))
        XCTAssertEqual(answer(200, #"{"access_token":"a\nb"}"#),
                       .failure(AuthProblem("the token endpoint's answer has no usable access_token")))
        XCTAssertEqual(answer(200, #"{"access_token":"a","token_type":"mac"}"#),
                       .failure(AuthProblem("the token endpoint issued a token of type mac, not bearer")))
    }

    // MARK: rules from params

    func testRulesFromParams() throws {
        let policy = FilePolicy(allowedDirectories: [])
        func read(_ json: String) throws -> (AuthHostPattern, AuthRule?) {
            try AuthRule.read(try JSONCodec.decode(json), policy: policy)
        }
        let (_, bearer) = try read(#"{"host":"api.test","type":"bearer","token":"t0k"}"#)
        XCTAssertEqual(bearer?.fixedCredential, Credential.bearer("t0k"))
        let (_, file) = try read(#"{"host":"api.test","type":"bearer","tokenFile":"/run/t"}"#)
        XCTAssertNil(file?.fixedCredential, "a file is read at each use")
        let (_, basic) = try read(#"{"host":"api.test","type":"basic","user":"u","password":"p"}"#)
        XCTAssertEqual(basic?.fixedCredential?.headers, [HTTPHeader("Authorization", "Basic dTpw")])
        let (host, removed) = try read(#"{"host":"*.Test","type":null}"#)
        XCTAssertEqual(host.description, "*.test")
        XCTAssertNil(removed)
        for (json, field) in [
            (#"{"host":"*","type":"bearer","token":"t"}"#, "host"),
            (#"{"host":"a","type":"bearer"}"#, "token"),
            (#"{"host":"a","type":"bearer","token":"t","tokenFile":"/f"}"#, "tokenFile"),
            (#"{"host":"a","type":"bearer","tokenFile":"rel"}"#, "tokenFile"),
            (#"{"host":"a","type":"bearer","token":"a\nb"}"#, "token"),
            (#"{"host":"a","type":"bearer","token":"t","user":"u"}"#, "user"),
            (#"{"host":"a","type":"basic","user":"u:v","password":"p"}"#, "user"),
            (#"{"host":"a","type":"kerberos"}"#, "type"),
            (#"{"host":"a"}"#, "type"),
            (#"{"host":"a","type":"oauth2","tokenUrl":"ftp://x/","clientId":"i","clientSecret":"s"}"#, "tokenUrl"),
            (#"{"host":"a","type":"oauth2","tokenUrl":"http://x/","clientSecret":"s"}"#, "clientId"),
        ] {
            XCTAssertThrowsError(try read(json), json) { error in
                XCTAssertEqual((error as? RPCError)?.data?.objectValue?["field"], .string(field), json)
            }
        }
    }

    func testAWSCredentialsFile() throws {
        let text = """
            # comment
            [default]
            aws_access_key_id = AKID1
            aws_secret_access_key = secret1

            [profile ci]
            aws_access_key_id=AKID2
            aws_secret_access_key=secret2
            aws_session_token = tok2
            [empty]
            aws_access_key_id = AKID3
            """
        XCTAssertEqual(AWSSigV4Rule.keys(inCredentialsFile: text, profile: "default"),
                       AWSSigV4Rule.Keys(accessKeyID: "AKID1", secretAccessKey: "secret1", sessionToken: nil))
        XCTAssertEqual(AWSSigV4Rule.keys(inCredentialsFile: text, profile: "ci"),
                       AWSSigV4Rule.Keys(accessKeyID: "AKID2", secretAccessKey: "secret2", sessionToken: "tok2"))
        XCTAssertNil(AWSSigV4Rule.keys(inCredentialsFile: text, profile: "empty"), "no secret key")
        XCTAssertNil(AWSSigV4Rule.keys(inCredentialsFile: text, profile: "missing"))
        let credential = Credential.aws(provider: "aws:amz:r:s", AWSSigV4Rule.Keys(accessKeyID: "A", secretAccessKey: "S", sessionToken: "T"))
        XCTAssertEqual(credential.signing, AWSSigV4(provider: "aws:amz:r:s", accessKeyID: "A", secretAccessKey: "S"))
        XCTAssertEqual(credential.headers, [HTTPHeader("X-Amz-Security-Token", "T")])
        XCTAssertEqual(Set(credential.secrets), ["S", "A", "T"])
    }

    func testHelperOutput() throws {
        func read(_ json: String) -> Result<Credential, AuthProblem> {
            HelperRule.credential(stdout: Array(json.utf8), now: 100, wallNow: 1_000_000)
        }
        let kept = try read(#"{"headers": {"Authorization": "Bearer h1", "X-Key": "k1"}, "expiresIn": 30}"#).get()
        XCTAssertEqual(kept.headers, [HTTPHeader("Authorization", "Bearer h1"), HTTPHeader("X-Key", "k1")])
        XCTAssertEqual(kept.usableUntil, 130)
        XCTAssertTrue(kept.kept)
        XCTAssertTrue(kept.secrets.contains("h1") && kept.secrets.contains("k1"))
        XCTAssertEqual(try read(#"{"headers": {"A": "b"}, "expiresAt": 1000060}"#).get().usableUntil, 160)
        XCTAssertFalse(try read(#"{"headers": {"A": "b"}}"#).get().kept, "neither: used once")
        XCTAssertEqual(read("{}"), .failure(AuthProblem("the helper's output has no \"headers\" object")))
        XCTAssertEqual(read("[1]"), .failure(AuthProblem("the helper's output is not one JSON object")))
        XCTAssertEqual(read(#"{"headers": {"A": "b\r\nX: y"}}"#),
                       .failure(AuthProblem("the helper's output has a header that cannot be sent (A)")))
        XCTAssertEqual(read(#"{"headers": {"Content-Length": "1"}}"#),
                       .failure(AuthProblem("the helper's output has a header that cannot be sent (Content-Length)")))
        let input = try JSONCodec.decode(HelperRule.input(CredentialRequest(url: "https://h/x", method: "GET", host: "h:443",
                                                                            challenge: "Bearer realm=\"r\"")))
        XCTAssertEqual(input, ["version": 1, "action": "get", "url": "https://h/x", "method": "GET", "host": "h:443",
                               "challenge": "Bearer realm=\"r\""])
        for bad in [#"{"headers": {"A": "b"}, "expiresIn": "abc"}"#, #"{"headers": {"A": "b"}, "expiresIn": null}"#,
                    #"{"headers": {"A": "b"}, "expiresIn": [1]}"#] {
            XCTAssertEqual(read(bad), .failure(AuthProblem("the helper's output has an \"expiresIn\" that is not a number of seconds")),
                           bad)
        }
        XCTAssertEqual(read(#"{"headers": {"A": "b"}, "expiresAt": "soon"}"#),
                       .failure(AuthProblem("the helper's output has an \"expiresAt\" that is not a number of seconds")))
        XCTAssertEqual(HelperRule.firstLine(Array("  oops: no token \nmore\n".utf8)), "oops: no token")
        XCTAssertNil(HelperRule.firstLine([]))
    }

    // MARK: HTTP logs

    func testRuleSecretsAreMaskedEvenWithRedactionOff() {
        let credential = Credential.bearer("rule-token-1234")
        let off = Redaction(enabled: false, ruleSecrets: credential.secrets)
        XCTAssertEqual(off.header(HTTPHeader("Authorization", "Bearer rule-token-1234")), HTTPHeader("Authorization", Redaction.mask))
        XCTAssertEqual(off.text("echo: Bearer rule-token-1234 and rule-token-1234"), "echo: <redacted> and <redacted>")
        XCTAssertEqual(off.url("http://h/?t=rule-token-1234"), "http://h/?t=<redacted>")
        XCTAssertEqual(off.json(["a": ["b": "rule-token-1234"]]), ["a": ["b": "<redacted>"]])
        XCTAssertEqual(off.header(HTTPHeader("Authorization", "Bearer the-clients-own")), HTTPHeader("Authorization", "Bearer the-clients-own"),
                       "redact: false shows what the client sent itself")
        XCTAssertEqual(off.text("client text"), "client text")
        // An AWS signature libcurl made from the rule's keys is masked wherever it shows up.
        var signed = Redaction(enabled: false, ruleSecrets: ["AKIDX", "secretkey"])
        var hop = ExchangeHop(url: "http://h/", method: "GET")
        let authorization = "AWS4-HMAC-SHA256 Credential=AKIDX/20261201/r/s/aws4_request, SignedHeaders=host;x-amz-date, Signature=abcdef0123"
        hop.requestHeaders = [HTTPHeader("Authorization", authorization)]
        signed.learn(from: HTTPRequest(url: "http://h/"), hops: [hop])
        XCTAssertEqual(signed.text("the server saw Signature=abcdef0123"), "the server saw Signature=<redacted>")
        XCTAssertEqual(signed.header(HTTPHeader("Authorization", authorization)), HTTPHeader("Authorization", Redaction.mask))
        let on = Redaction(enabled: true, ruleSecrets: credential.secrets)
        XCTAssertEqual(on.text("rule-token-1234"), Redaction.mask)
    }
}
