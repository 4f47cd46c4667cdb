import FetchEngine
import JSONRPC
import XCTest

@testable import FetchDaemon

/// What HTTP logs hide: credential headers, secret-named fields, and every secret value a
/// request carries wherever else it shows up.
final class RedactionTests: XCTestCase {
    private let mask = Redaction.mask

    private func learned(_ request: HTTPRequest, hops: [ExchangeHop] = [], enabled: Bool = true) -> Redaction {
        var redaction = Redaction(enabled: enabled)
        redaction.learn(from: request, hops: hops)
        return redaction
    }

    func testSecretNames() {
        for name in ["password", "PASSWORD", "user_passwd", "client_secret", "access_token", "refresh_token",
                     "api_key", "X-ApiKey", "newPassword", "secret", "key", "auth", "code", "sig"] {
            XCTAssertTrue(Redaction.isSecretName(name), name)
        }
        for name in ["user", "page", "grant_type", "q", "monkey", "author"] {
            XCTAssertFalse(Redaction.isSecretName(name), name)
        }
    }

    func testSecretHeadersAreMaskedWhateverTheirCase() {
        let r = Redaction(enabled: true)
        for name in ["Authorization", "authorization", "PROXY-AUTHORIZATION", "Cookie", "set-cookie"] {
            XCTAssertEqual(r.header(HTTPHeader(name, "Bearer abcdef")), HTTPHeader(name, mask), name)
        }
        XCTAssertEqual(r.header(HTTPHeader("X-Other", "Bearer abcdef")), HTTPHeader("X-Other", "Bearer abcdef"))
        XCTAssertEqual(r.header(HTTPHeader("Authorization-Hint", "x")), HTTPHeader("Authorization-Hint", "x"),
                       "only the exact header names")
    }

    func testDisabledChangesNothing() {
        let request = HTTPRequest(url: "http://h/?access_token=tokvalue1", headers: [HTTPHeader("Authorization", "Bearer authvalue1")])
        let r = learned(request, enabled: false)
        XCTAssertEqual(r.header(HTTPHeader("Authorization", "Bearer authvalue1")).value, "Bearer authvalue1")
        XCTAssertEqual(r.field(name: "password", value: "pw"), "pw")
        XCTAssertEqual(r.text("authvalue1 tokvalue1"), "authvalue1 tokvalue1")
        XCTAssertEqual(r.json(["password": "x"]), ["password": "x"])
    }

    func testFieldsNamedLikeSecretsAreMasked() {
        let r = Redaction(enabled: true)
        XCTAssertEqual(r.field(name: "client_secret", value: "abc"), mask)
        XCTAssertEqual(r.field(name: "Password", value: ""), mask)
        XCTAssertEqual(r.field(name: "user", value: "bob"), "bob")
    }

    func testHeaderSecretsAreMaskedInFreeText() {
        let request = HTTPRequest(url: "http://h/", headers: [
            HTTPHeader("Authorization", "Bearer eyAuthToken123"),
            HTTPHeader("Proxy-Authorization", "Basic cHJveHk6cHc="),
            HTTPHeader("Cookie", "sid=cookieValue42; theme=darkmode"),
        ])
        let r = learned(request)
        let echo = #"{"headers": [["Authorization", "Bearer eyAuthToken123"], ["Proxy-Authorization", "Basic cHJveHk6cHc="], ["Cookie", "sid=cookieValue42; theme=darkmode"]]}"#
        let out = r.text(echo)
        for secret in ["eyAuthToken123", "cHJveHk6cHc=", "cookieValue42", "darkmode"] {
            XCTAssertFalse(out.contains(secret), "\(secret) in \(out)")
        }
        XCTAssertTrue(out.contains(mask), out)
        XCTAssertTrue(r.text("the token eyAuthToken123 alone").contains("the token \(mask) alone"))
    }

    func testQueryJSONFormAndMultipartSecretsAreMaskedInFreeText() {
        let json = HTTPRequest(method: "POST", url: "http://h/p?access_token=queryTok99&page=22222",
                               body: .bytes(Array(#"{"user":"bob","password":"hunter2pw","nested":[{"api_key":"nestedKey7"}],"pin_secret":12345}"#.utf8)))
        var r = learned(json)
        let out = r.text("queryTok99 hunter2pw nestedKey7 12345 bob 22222")
        XCTAssertEqual(out, "\(mask) \(mask) \(mask) \(mask) bob 22222")

        let form = HTTPRequest(method: "POST", url: "http://h/",
                               body: .bytes(Array("grant_type=client_credentials&client_secret=form%2Fsecret+value".utf8)))
        r = learned(form)
        XCTAssertEqual(r.text("form/secret value"), mask, "learned decoded")
        XCTAssertEqual(r.text("client_secret=form%2Fsecret+value"), "client_secret=\(mask)", "and as sent")
        XCTAssertEqual(r.text("client_credentials"), "client_credentials")

        let multipart = HTTPRequest(method: "POST", url: "http://h/", body: .multipart(MultipartForm(parts: [
            .init(name: "password", source: .bytes(Array("multiPw777".utf8))),
            .init(name: "note", source: .bytes(Array("plainNote".utf8))),
        ])))
        r = learned(multipart)
        XCTAssertEqual(r.text("multiPw777 plainNote"), "\(mask) plainNote")
    }

    func testSecretsAreAlsoMaskedPercentEncoded() {
        let request = HTTPRequest(url: "http://h/", headers: [HTTPHeader("Authorization", "Bearer a b/c+d")])
        let r = learned(request)
        XCTAssertFalse(r.text("x=a%20b%2Fc%2Bd").contains("%2Fc"), r.text("x=a%20b%2Fc%2Bd"))
        XCTAssertFalse(r.text("x=a+b%2Fc%2Bd").contains("%2Fc"), r.text("x=a+b%2Fc%2Bd"))
    }

    func testSetCookieAnswersAreLearnedFromTheHops() {
        var hop = ExchangeHop(url: "http://h/login", method: "GET")
        hop.status = 200
        hop.responseHeaders = [HTTPHeader("Set-Cookie", "session=srvSession55; HttpOnly")]
        let r = learned(HTTPRequest(url: "http://h/login"), hops: [hop])
        XCTAssertEqual(r.text("you are srvSession55"), "you are \(mask)")
    }

    /// A secret query parameter first seen in a redirect's Location (and the next hop's URL)
    /// is as secret as one in the request's own URL.
    func testSecretQueryParametersOfRedirectHopsAreLearned() {
        var first = ExchangeHop(url: "http://h/start", method: "GET")
        first.status = 302
        first.responseHeaders = [HTTPHeader("Location", "/cb?access_token=hopToken77")]
        var second = ExchangeHop(url: "http://h/cb?access_token=hopToken77", method: "GET")
        second.status = 200
        let r = learned(HTTPRequest(url: "http://h/start"), hops: [first, second])
        XCTAssertEqual(r.text("/cb?access_token=hopToken77"), "/cb?access_token=\(mask)")
    }

    func testShortValuesAreNotMaskedElsewhere() {
        let request = HTTPRequest(method: "POST", url: "http://h/", body: .bytes(Array(#"{"password":"abc"}"#.utf8)))
        let r = learned(request)
        XCTAssertEqual(r.text("abcdef"), "abcdef", "3-byte values would hit innocent text")
        XCTAssertEqual(r.json(["password": "abc"]), ["password": .string(mask)], "the field itself is still masked")
    }

    func testLongestValueIsMaskedFirst() {
        let request = HTTPRequest(url: "http://h/", headers: [HTTPHeader("Cookie", "a=longsecretvalue; b=secretval")])
        let r = learned(request)
        XCTAssertEqual(r.text("longsecretvalue"), mask, "no half-masked leftovers")
    }

    func testJSONMasksSecretKeysAtAnyDepthWhateverTheValue() {
        let r = Redaction(enabled: true)
        let value: JSONValue = ["user": "bob", "password": 1234, "list": [["token": ["deep": true]], "plain"],
                                "inner": ["apiKey": "x", "refresh_token": .null]]
        let expected: JSONValue = ["user": "bob", "password": .string(mask), "list": [["token": .string(mask)], "plain"],
                                   "inner": ["apiKey": .string(mask), "refresh_token": .string(mask)]]
        XCTAssertEqual(r.json(value), expected)
        // An object written ahead as text is masked the same way.
        var writer = JSONObjectWriter()
        writer.add("user", "bob")
        writer.add("password", "hunter22")
        let encoded = writer.finish()
        XCTAssertEqual(r.json(encoded), ["user": "bob", "password": .string(mask)])
        let rule = Redaction(enabled: false, ruleSecrets: ["s3cretRule"])
        var carried = JSONObjectWriter()
        carried.add("echo", "Bearer s3cretRule")
        let echoed = carried.finish()
        XCTAssertEqual(rule.json(echoed), ["echo": .string("Bearer \(mask)")])
    }

    func testQueryAndFormParsing() {
        XCTAssertEqual(Redaction.queryItems("http://h/p?a=1&b=two+words&c=%2F%3D&d&=e#frag=x").map { [$0.0, $0.1] },
                       [["a", "1"], ["b", "two words"], ["c", "/="], ["d", ""], ["", "e"]])
        XCTAssertTrue(Redaction.queryItems("http://h/p").isEmpty)
        XCTAssertTrue(Redaction.queryItems("http://h/p#a=b").isEmpty)
        XCTAssertEqual(Redaction.formItems("x=1=2").map { [$0.0, $0.1] }, [["x", "1=2"]])
    }

    /// Words that are part of every such header are not secrets: "Bearer", "Basic", cookie
    /// attributes (Path, HttpOnly, Max-Age values, dates) and cookie names.
    func testSchemeWordsAndCookieAttributesAreNotTreatedAsSecrets() {
        var hop = ExchangeHop(url: "http://h/", method: "GET")
        hop.status = 200
        hop.responseHeaders = [HTTPHeader("Set-Cookie", "session=srvSession55; Path=/; Max-Age=3600; Secure; HttpOnly")]
        let request = HTTPRequest(url: "http://h/", headers: [HTTPHeader("Authorization", "Bearer tokTok1234")])
        let r = learned(request, hops: [hop])
        let text = "WWW-Authenticate: Bearer realm=x; session cookie Path, Secure, HttpOnly; Content-Length: 3600"
        XCTAssertEqual(r.text(text), text, "only the secret values themselves are masked")
        XCTAssertEqual(r.text("tokTok1234 srvSession55"), "\(mask) \(mask)")
    }
}
