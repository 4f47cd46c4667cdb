@testable import FetchDaemon
import FetchEngine
import XCTest

/// The redirects the daemon follows itself for a request that carries a rule's credential:
/// libcurl's rules for methods and bodies, its limit and its refusals, and what goes to a hop
/// of another origin. Pure: requests and answers in, hops out.
final class RedirectFollowingTests: XCTestCase {
    private func answer(_ status: Int, location: String?, exchange: [ExchangeHop] = [], totalMicroseconds: Int64 = 0)
        -> HTTPResponse {
        var timings = TransferTimings()
        timings.total = totalMicroseconds
        var response = HTTPResponse(status: status, headers: ResponseHeaders(location.map { [HTTPHeader("Location", $0)] } ?? []),
                                    url: "", body: [], redirects: 0, httpVersion: "HTTP/1.1", timings: timings,
                                    sentBytes: 0, receivedBytes: 0)
        response.exchange = exchange
        return response
    }

    private func post(_ url: String) -> HTTPRequest {
        HTTPRequest(method: "POST", url: url, headers: [HTTPHeader("Cookie", "mine=1"), HTTPHeader("X-Own", "o")],
                    body: .bytes(Array("payload".utf8)))
    }

    func testLibcurlFollowsTheAnswersUntilTheDaemonTakesOver() {
        var redirects = RedirectFollowing()
        XCTAssertEqual(redirects.redirect(answer(302, location: "/b"), of: post("http://a.test/"), secrets: []), .stay)
        var request = post("http://a.test/")
        redirects.takeOver(&request)
        XCTAssertEqual(request.maxRedirects, 0, "libcurl follows none")
        XCTAssertEqual(redirects.limit, 10, "the request's maxRedirects")
        XCTAssertFalse(redirects.isIdle)
    }

    func testMethodsAndBodiesAsLibcurl() {
        for (status, method, wantMethod, keepsBody) in [(301, "POST", "GET", false), (302, "POST", "GET", false),
                                                       (303, "POST", "GET", false), (302, "PUT", "PUT", false),
                                                       (303, "HEAD", "HEAD", false), (307, "POST", "POST", true),
                                                       (308, "PUT", "PUT", true)] {
            var redirects = RedirectFollowing()
            var sent = post("http://a.test/x")
            sent.method = method
            redirects.takeOver(&sent)
            XCTAssertEqual(redirects.redirect(answer(status, location: "/y"), of: sent, secrets: []), .follow, "\(status)")
            var next = post("http://a.test/x")
            next.method = method
            redirects.apply(to: &next)
            XCTAssertEqual(next.url, "http://a.test/y")
            XCTAssertEqual(next.method, wantMethod, "\(status) \(method)")
            XCTAssertEqual(next.body != .none, keepsBody, "\(status) \(method)")
        }
        // A body dropped on the way stays dropped after a 307.
        var redirects = RedirectFollowing()
        var sent = post("http://a.test/x")
        redirects.takeOver(&sent)
        _ = redirects.redirect(answer(303, location: "/y"), of: sent, secrets: [])
        var next = post("http://a.test/x")
        redirects.apply(to: &next)
        XCTAssertEqual(redirects.redirect(answer(307, location: "/z"), of: next, secrets: []), .follow)
        next = post("http://a.test/x")
        redirects.apply(to: &next)
        XCTAssertEqual(next.url, "http://a.test/z")
        XCTAssertEqual(next.method, "GET")
        XCTAssertEqual(next.body, .none)
        XCTAssertEqual(redirects.followed, 2)
    }

    func testTheClientsOwnCredentialsGoToItsOwnOriginOnly() {
        for (location, crossed) in [("http://a.test/y", false), ("https://a.test/y", true), ("http://a.test:81/y", true),
                                    ("http://b.test/y", true), ("/y", false)] {
            var redirects = RedirectFollowing()
            var sent = post("http://a.test/x")
            redirects.takeOver(&sent)
            XCTAssertEqual(redirects.redirect(answer(307, location: location), of: sent, secrets: []), .follow)
            var next = post("http://a.test/x")
            next.headers.append(HTTPHeader("authorization", "Bearer mine"))
            redirects.apply(to: &next)
            let names = next.headers.map { $0.name.lowercased() }
            XCTAssertEqual(names, crossed ? ["x-own"] : ["cookie", "x-own", "authorization"], location)
        }
    }

    func testTheLimitAndTheRefusedSchemes() {
        var redirects = RedirectFollowing()
        var sent = HTTPRequest(url: "http://a.test/", maxRedirects: 2)
        redirects.takeOver(&sent)
        XCTAssertEqual(redirects.redirect(answer(302, location: "/1"), of: sent, secrets: []), .follow)
        XCTAssertEqual(redirects.redirect(answer(302, location: "/2"), of: sent, secrets: []), .follow)
        guard case .fail(let error) = redirects.redirect(answer(302, location: "/3"), of: sent, secrets: []) else {
            return XCTFail("past maxRedirects")
        }
        XCTAssertEqual(error.kind, .tooManyRedirects)
        XCTAssertEqual(error.detail, "Maximum (2) redirects followed")
        XCTAssertEqual(error.curlCode, 47)
        redirects = RedirectFollowing()
        sent = HTTPRequest(url: "http://a.test/")
        redirects.takeOver(&sent)
        guard case .fail(let refused) = redirects.redirect(answer(302, location: "ftp://a.test/f"), of: sent, secrets: []) else {
            return XCTFail("another scheme")
        }
        XCTAssertEqual(refused.detail, "Protocol \"ftp\" not supported or disabled in libcurl")
        XCTAssertEqual(refused.curlCode, 1)
        // maxRedirects 0, no Location, not a redirect: the answer stands.
        redirects = RedirectFollowing()
        sent = HTTPRequest(url: "http://a.test/", maxRedirects: 0)
        redirects.takeOver(&sent)
        XCTAssertEqual(redirects.redirect(answer(302, location: "/1"), of: sent, secrets: []), .stay)
        redirects = RedirectFollowing()
        sent = HTTPRequest(url: "http://a.test/")
        redirects.takeOver(&sent)
        XCTAssertEqual(redirects.redirect(answer(302, location: nil), of: sent, secrets: []), .stay)
        XCTAssertEqual(redirects.redirect(answer(200, location: "/1"), of: sent, secrets: []), .stay)
        XCTAssertEqual(redirects.redirect(answer(304, location: "/1"), of: sent, secrets: []), .stay)
    }

    func testTheFinalAnswerCountsEveryHop() {
        var redirects = RedirectFollowing()
        var sent = HTTPRequest(url: "http://a.test/")
        redirects.takeOver(&sent)
        let first = ExchangeHop(url: "http://a.test/", method: "GET")
        _ = redirects.redirect(answer(302, location: "http://b.test/", exchange: [first], totalMicroseconds: 1500), of: sent,
                               secrets: ["s1"])
        XCTAssertEqual(redirects.earlierSecrets, ["s1"])
        var last = answer(200, location: nil, exchange: [ExchangeHop(url: "http://b.test/", method: "GET")], totalMicroseconds: 500)
        last.redirects = 0
        let final = redirects.completed(last)
        XCTAssertEqual(final.redirects, 1)
        XCTAssertEqual(final.exchange.map(\.url), ["http://a.test/", "http://b.test/"])
        XCTAssertEqual(final.timings.total, 2000)
        XCTAssertEqual(final.timings.redirect, 1500)
        XCTAssertEqual(RedirectFollowing().completed(last).redirects, 0)
    }
}
