import FetchEngine
import XCTest

@testable import FetchDaemon

/// RFC 9111's rules as `CacheRules` applies them for a private cache: storing, freshness,
/// age, reuse by mode and directives, validation, 304 updates, Vary and invalidation. Times
/// are given (no clock, no sleeping): `t0` is when the answer came.
final class CacheRulesTests: XCTestCase {
    let t0 = 1_700_000_000.0

    private func http(_ seconds: Double) -> String {
        var t = time_t(seconds)
        var parts = tm()
        gmtime_r(&t, &parts)
        var buffer = [CChar](repeating: 0, count: 64)
        let n = strftime(&buffer, buffer.count, "%a, %d %b %Y %H:%M:%S GMT", &parts)
        return String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    private func stored(_ headers: [(String, String)], status: Int = 200, date: Double? = nil,
                        requestTime: Double? = nil) -> StoredResponse {
        var fields = headers.map { HTTPHeader($0.0, $0.1) }
        if !fields.contains(where: { $0.name == "Date" }) { fields.append(HTTPHeader("Date", http(date ?? t0))) }
        return StoredResponse(status: status, headers: fields, requestTime: requestTime ?? t0, responseTime: t0)
    }

    private func storable(_ status: Int, _ headers: [(String, String)], request: [(String, String)] = []) -> Bool {
        CacheRules.storable(status: status, requestHeaders: request.map { HTTPHeader($0.0, $0.1) },
                            responseHeaders: headers.map { HTTPHeader($0.0, $0.1) })
    }

    private func reuse(_ s: StoredResponse, at now: Double, mode: CacheMode = .default,
                       request: [(String, String)] = []) -> CacheRules.Reuse {
        CacheRules.reuse(s, mode: mode, requestHeaders: request.map { HTTPHeader($0.0, $0.1) }, now: now)
    }

    // MARK: Cache-Control parsing

    func testDirectivesAreCaseInsensitiveQuotedAndJoinedAcrossLines() {
        let cc = CacheControl([HTTPHeader("Cache-Control", #"Max-Age=60, no-cache="Set-Cookie, X""#),
                               HTTPHeader("cache-control", "private")])
        XCTAssertEqual(cc.seconds("max-age"), 60)
        XCTAssertEqual(cc.directives["no-cache"], "Set-Cookie, X")
        XCTAssertTrue(cc.has("private"))
        XCTAssertFalse(cc.has("x"))
    }

    func testInvalidOrConflictingDeltaSecondsIsZero() {
        XCTAssertEqual(CacheControl([HTTPHeader("Cache-Control", "max-age=abc")]).seconds("max-age"), 0)
        XCTAssertEqual(CacheControl([HTTPHeader("Cache-Control", "max-age=60, max-age=120")]).seconds("max-age"), 0)
        XCTAssertEqual(CacheControl([HTTPHeader("Cache-Control", "max-age=99999999999")]).seconds("max-age"), 2_147_483_648)
    }

    // MARK: storing (RFC 9111 3)

    func testStorableStatusesAndDirectives() {
        XCTAssertTrue(storable(200, []))                              // heuristically cacheable
        XCTAssertTrue(storable(404, []))
        XCTAssertFalse(storable(201, []))                             // not heuristic, no freshness
        XCTAssertTrue(storable(201, [("Cache-Control", "max-age=5")]))
        XCTAssertTrue(storable(500, [("Expires", http(t0 + 60))]))
        XCTAssertFalse(storable(200, [("Cache-Control", "no-store")]))
        XCTAssertFalse(storable(200, [], request: [("Cache-Control", "no-store")]))
        XCTAssertTrue(storable(201, [("Cache-Control", "private")]))  // a private cache may
        XCTAssertFalse(storable(201, [("Cache-Control", "s-maxage=60")]))  // shared caches only
        XCTAssertFalse(storable(206, [("Cache-Control", "max-age=60")]))
        XCTAssertFalse(storable(304, [("Cache-Control", "max-age=60")]))
        XCTAssertFalse(storable(101, []))
        XCTAssertTrue(storable(200, [("Cache-Control", "must-understand, no-store, max-age=60")]))
    }

    func testOnlyAnswersThatCanBeReusedAreWorthStoring() {
        XCTAssertFalse(CacheRules.worthStoring(stored([])))
        XCTAssertTrue(CacheRules.worthStoring(stored([("ETag", #""e""#)])))
        XCTAssertTrue(CacheRules.worthStoring(stored([("Cache-Control", "max-age=1")])))
        XCTAssertTrue(CacheRules.worthStoring(stored([("Cache-Control", "max-age=0, stale-if-error=60")])))
    }

    func testHopByHopFieldsAreNotStored() {
        let kept = CacheRules.storedHeaders([HTTPHeader("Connection", "close"), HTTPHeader("Keep-Alive", "5"),
                                             HTTPHeader("Transfer-Encoding", "chunked"), HTTPHeader("ETag", "x")])
        XCTAssertEqual(kept, [HTTPHeader("ETag", "x")])
    }

    // MARK: freshness (4.2.1, 4.2.2)

    func testMaxAgeWinsOverExpiresAndSMaxageIsIgnored() {
        XCTAssertEqual(CacheRules.freshnessLifetime(stored([("Cache-Control", "max-age=30"), ("Expires", http(t0 + 600))])), 30)
        XCTAssertEqual(CacheRules.freshnessLifetime(stored([("Cache-Control", "s-maxage=600")])), 0)
        XCTAssertEqual(CacheRules.freshnessLifetime(stored([("Cache-Control", "s-maxage=600, max-age=5")])), 5)
    }

    func testExpiresCountsFromDateAndInvalidExpiresIsExpired() {
        XCTAssertEqual(CacheRules.freshnessLifetime(stored([("Expires", http(t0 + 100))], date: t0 - 50)), 150)
        XCTAssertEqual(CacheRules.freshnessLifetime(stored([("Expires", "0")])), 0)
        XCTAssertEqual(CacheRules.freshnessLifetime(stored([("Expires", http(t0 + 100)), ("Expires", http(t0 + 200))])), 0)
        XCTAssertEqual(CacheRules.freshnessLifetime(stored([("Expires", http(t0 - 100))])), 0)
    }

    func testHeuristicFreshnessIsTenPercentOfLastModified() {
        XCTAssertEqual(CacheRules.freshnessLifetime(stored([("Last-Modified", http(t0 - 1000))])), 100)
        XCTAssertEqual(CacheRules.freshnessLifetime(stored([("Last-Modified", http(t0 - 1000))], status: 201)), 0)
        XCTAssertEqual(CacheRules.freshnessLifetime(stored([("Last-Modified", http(t0 - 1000)), ("Cache-Control", "public")],
                                                           status: 201)), 100)
        XCTAssertEqual(CacheRules.freshnessLifetime(stored([("Last-Modified", http(t0 + 1000))])), 0)
    }

    // MARK: age (4.2.3)

    func testAgeIsTheCorrectedInitialAgePlusResidentTime() {
        // Age 30 from upstream, the request took 2 s, 10 s in the cache: 42.
        let s = stored([("Age", "30")], requestTime: t0 - 2)
        XCTAssertEqual(CacheRules.currentAge(s, now: t0 + 10), 42)
        // A Date 100 s behind the arrival: apparent_age 100 wins over Age 30 + 2.
        XCTAssertEqual(CacheRules.currentAge(stored([("Age", "30")], date: t0 - 100, requestTime: t0 - 2), now: t0), 100)
        // A Date in the future is no negative age; a bad Age is none.
        XCTAssertEqual(CacheRules.currentAge(stored([("Age", "x")], date: t0 + 500), now: t0 + 1), 1)
    }

    func testAgeCountsAgainstExpires() {
        let s = stored([("Expires", http(t0 + 100)), ("Age", "200")])
        XCTAssertEqual(reuse(s, at: t0), .validate)
        XCTAssertEqual(reuse(stored([("Expires", http(t0 + 100)), ("Age", "50")]), at: t0 + 10), .fresh)
        XCTAssertEqual(reuse(stored([("Expires", http(t0 + 100)), ("Age", "50")]), at: t0 + 60), .validate)
    }

    // MARK: reuse (4, 4.2.4, 5.2)

    func testFreshUntilMaxAgeThenValidate() {
        let s = stored([("Cache-Control", "max-age=60")])
        XCTAssertEqual(reuse(s, at: t0 + 59), .fresh)
        XCTAssertEqual(reuse(s, at: t0 + 60), .validate)
    }

    func testNoCacheAlwaysValidatesEvenForForceCache() {
        let s = stored([("Cache-Control", "no-cache, max-age=600")])
        XCTAssertEqual(reuse(s, at: t0), .validate)
        XCTAssertEqual(reuse(s, at: t0, mode: .forceCache), .validate)
    }

    func testMustRevalidateOnlyOnceStale() {
        let s = stored([("Cache-Control", "max-age=10, must-revalidate, stale-while-revalidate=60")])
        XCTAssertEqual(reuse(s, at: t0 + 5), .fresh)
        XCTAssertEqual(reuse(s, at: t0 + 20), .validate)
        XCTAssertEqual(reuse(s, at: t0 + 20, request: [("Cache-Control", "max-stale=100")]), .validate)
        XCTAssertEqual(reuse(s, at: t0 + 20, mode: .forceCache), .validate)
        XCTAssertFalse(CacheRules.mayServeOnError(stored([("Cache-Control", "max-age=0, must-revalidate, stale-if-error=60")]),
                                                  requestHeaders: [], now: t0 + 1))
    }

    func testStaleWhileRevalidateWindow() {
        let s = stored([("Cache-Control", "max-age=10, stale-while-revalidate=30")])
        XCTAssertEqual(reuse(s, at: t0 + 20), .staleWhileRevalidate)
        XCTAssertEqual(reuse(s, at: t0 + 40), .staleWhileRevalidate)
        XCTAssertEqual(reuse(s, at: t0 + 41), .validate)
    }

    func testStaleIfErrorWindowFromResponseOrRequest() {
        let s = stored([("Cache-Control", "max-age=10, stale-if-error=30")])
        XCTAssertTrue(CacheRules.mayServeOnError(s, requestHeaders: [], now: t0 + 40))
        XCTAssertFalse(CacheRules.mayServeOnError(s, requestHeaders: [], now: t0 + 41))
        let plain = stored([("Cache-Control", "max-age=10")])
        XCTAssertFalse(CacheRules.mayServeOnError(plain, requestHeaders: [], now: t0 + 20))
        XCTAssertTrue(CacheRules.mayServeOnError(plain, requestHeaders: [HTTPHeader("Cache-Control", "stale-if-error=60")],
                                                 now: t0 + 20))
        XCTAssertTrue(CacheRules.isErrorForStaleIfError(503))
        XCTAssertFalse(CacheRules.isErrorForStaleIfError(404))
    }

    func testRequestDirectives() {
        let s = stored([("Cache-Control", "max-age=100")])
        XCTAssertEqual(reuse(s, at: t0 + 50, request: [("Cache-Control", "max-age=10")]), .validate)
        XCTAssertEqual(reuse(s, at: t0 + 50, request: [("Cache-Control", "min-fresh=60")]), .validate)
        XCTAssertEqual(reuse(s, at: t0 + 50, request: [("Cache-Control", "min-fresh=40")]), .fresh)
        XCTAssertEqual(reuse(s, at: t0 + 50, request: [("Cache-Control", "no-cache")]), .validate)
        XCTAssertEqual(reuse(s, at: t0 + 50, request: [("Pragma", "no-cache")]), .validate)
        // Pragma counts only without Cache-Control (5.4).
        XCTAssertEqual(reuse(s, at: t0 + 50, request: [("Pragma", "no-cache"), ("Cache-Control", "max-stale")]), .fresh)
        XCTAssertEqual(reuse(s, at: t0 + 150, request: [("Cache-Control", "max-stale")]), .stale)
        XCTAssertEqual(reuse(s, at: t0 + 150, request: [("Cache-Control", "max-stale=40")]), .validate)
        XCTAssertEqual(reuse(s, at: t0 + 150, request: [("Cache-Control", "max-stale=60")]), .stale)
    }

    func testModes() {
        let fresh = stored([("Cache-Control", "max-age=100")])
        let stale = stored([("Cache-Control", "max-age=1")])
        XCTAssertEqual(reuse(fresh, at: t0 + 5, mode: .noCache), .validate)
        XCTAssertEqual(reuse(stale, at: t0 + 5, mode: .forceCache), .stale)
        XCTAssertEqual(reuse(fresh, at: t0 + 5, mode: .forceCache), .fresh)
        XCTAssertEqual(reuse(stale, at: t0 + 5, mode: .onlyIfCached), .stale)
        XCTAssertEqual(CacheRules.modeHeaders(.noStore, existing: []), [HTTPHeader("Pragma", "no-cache"), HTTPHeader("Cache-Control", "no-cache")])
        XCTAssertEqual(CacheRules.modeHeaders(.reload, existing: [HTTPHeader("Pragma", "x")]), [HTTPHeader("Cache-Control", "no-cache")])
        XCTAssertEqual(CacheRules.modeHeaders(.noCache, existing: []), [HTTPHeader("Cache-Control", "max-age=0")])
        XCTAssertEqual(CacheRules.modeHeaders(.forceCache, existing: []), [])
    }

    // MARK: validation (4.3)

    func testConditionalHeadersAndWhichStoredResponseA304Answers() {
        let s = stored([("ETag", #"W/"v1""#), ("Last-Modified", http(t0 - 100))])
        XCTAssertEqual(CacheRules.conditionalHeaders(for: s),
                       [HTTPHeader("If-None-Match", #"W/"v1""#), HTTPHeader("If-Modified-Since", http(t0 - 100))])
        XCTAssertTrue(CacheRules.notModifiedMatches(s, [HTTPHeader("ETag", #""v1""#)]))
        XCTAssertFalse(CacheRules.notModifiedMatches(s, [HTTPHeader("ETag", #""v2""#)]))
        XCTAssertTrue(CacheRules.notModifiedMatches(s, []))
    }

    func testA304UpdatesHeadersButNotTheBodysFraming() {
        let s = stored([("Cache-Control", "max-age=0"), ("Content-Length", "10"), ("Content-Type", "text/plain"),
                        ("X-A", "old"), ("X-A", "old2"), ("Age", "500"), ("ETag", #""e""#)])
        let updated = CacheRules.updated(s, with: [HTTPHeader("Cache-Control", "max-age=60"), HTTPHeader("X-A", "new"),
                                                   HTTPHeader("Content-Length", "0"), HTTPHeader("Date", http(t0 + 100)),
                                                   HTTPHeader("Connection", "close")],
                                         requestTime: t0 + 99, responseTime: t0 + 100)
        XCTAssertEqual(updated.headers.last(named: "Cache-Control"), "max-age=60")
        XCTAssertEqual(updated.headers.filter { $0.name == "X-A" }.map(\.value), ["new"])
        XCTAssertEqual(updated.headers.last(named: "Content-Length"), "10")
        XCTAssertEqual(updated.headers.last(named: "Content-Type"), "text/plain")
        XCTAssertNil(updated.headers.last(named: "Connection"))
        XCTAssertNil(updated.headers.last(named: "Age"))  // the old answer's age no longer holds
        XCTAssertEqual(updated.responseTime, t0 + 100)
        XCTAssertEqual(reuse(updated, at: t0 + 130), .fresh)
        XCTAssertEqual(reuse(updated, at: t0 + 161), .validate)
    }

    // MARK: Vary (4.1)

    func testVaryNamesAndKeys() {
        XCTAssertEqual(CacheRules.varyNames([HTTPHeader("Vary", "Accept-Language, accept"), HTTPHeader("vary", "Accept")]),
                       ["accept", "accept-language"])
        XCTAssertNil(CacheRules.varyNames([HTTPHeader("Vary", "Accept, *")]))
        XCTAssertEqual(CacheRules.varyNames([]), [])
        let names = ["accept-language"]
        let en = CacheRules.varyKey(names: names, requestHeaders: [HTTPHeader("Accept-Language", "en, fr")])
        XCTAssertEqual(en, CacheRules.varyKey(names: names, requestHeaders: [HTTPHeader("accept-language", "en,fr")]))
        XCTAssertEqual(en, CacheRules.varyKey(names: names, requestHeaders: [HTTPHeader("Accept-Language", "en"),
                                                                             HTTPHeader("Accept-Language", "fr")]))
        XCTAssertNotEqual(en, CacheRules.varyKey(names: names, requestHeaders: [HTTPHeader("Accept-Language", "fr")]))
        XCTAssertNotEqual(CacheRules.varyKey(names: names, requestHeaders: []),
                          CacheRules.varyKey(names: names, requestHeaders: [HTTPHeader("Accept-Language", "")]))
    }

    // MARK: invalidation (4.4)

    func testUnsafeMethodsInvalidateTheURLAndSameOriginLocations() {
        let url = "http://a.test/x?q=1"
        XCTAssertEqual(CacheRules.invalidated(method: "POST", status: 201, url: url, responseHeaders: [
            HTTPHeader("Location", "/y"), HTTPHeader("Content-Location", "http://other.test/z"),
        ]), ["http://a.test/x?q=1", "http://a.test/y"])
        XCTAssertEqual(CacheRules.invalidated(method: "GET", status: 200, url: url, responseHeaders: []), [])
        XCTAssertEqual(CacheRules.invalidated(method: "DELETE", status: 500, url: url, responseHeaders: []), [])
        XCTAssertEqual(CacheRules.invalidated(method: "PUT", status: 204, url: url + "#frag", responseHeaders: [
            HTTPHeader("Content-Location", "https://a.test/x"),
        ]), [url])
    }
}
