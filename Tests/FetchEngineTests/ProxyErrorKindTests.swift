import CCurl
import XCTest
@testable import FetchEngine

/// A SOCKS proxy whose name does not resolve is a `proxy` failure, not the URL host's `dns`.
final class ProxyErrorKindTests: XCTestCase {
    func testProxyHostName() {
        XCTAssertEqual(TransferError.hostName(ofProxy: "socks5://no-such.invalid:1080"), "no-such.invalid")
        XCTAssertEqual(TransferError.hostName(ofProxy: "http://ann:p@ss@proxy.test:3128/"), "proxy.test")
        XCTAssertEqual(TransferError.hostName(ofProxy: "proxy.test"), "proxy.test")
        XCTAssertNil(TransferError.hostName(ofProxy: "socks5://[::1]:1080"))
        XCTAssertNil(TransferError.hostName(ofProxy: ""))
    }

    func testUnresolvedSocksProxyIsKindProxy() {
        let proxy = TransferError.from(code: CURLE_COULDNT_RESOLVE_HOST, detail: "Could not resolve host: p.invalid",
                                       proxy: "socks5://p.invalid:1080")
        XCTAssertEqual(proxy.kind, .proxy)
        XCTAssertEqual(proxy.curlCode, 6)
        let target = TransferError.from(code: CURLE_COULDNT_RESOLVE_HOST, detail: "Could not resolve host: t.invalid",
                                        proxy: "socks5://p.invalid:1080")
        XCTAssertEqual(target.kind, .dns)
        let direct = TransferError.from(code: CURLE_COULDNT_RESOLVE_HOST, detail: "Could not resolve host: p.invalid")
        XCTAssertEqual(direct.kind, .dns)
    }
}
