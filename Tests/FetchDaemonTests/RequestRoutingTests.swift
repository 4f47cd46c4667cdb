import FetchEngine
import JSONRPC
import XCTest

@testable import FetchDaemon

final class RequestRoutingTests: XCTestCase {
    private func routing(_ params: JSONValue) throws -> RequestRouting {
        var reader = try ParamReader(params)
        return try RequestModel(reading: &reader, allowsBody: true, policy: FilePolicy(allowedDirectories: [])).routing
    }

    private func field(of params: JSONValue) -> String? {
        do {
            _ = try routing(params)
            return nil
        } catch let error as RPCError {
            return error.data?.objectValue?["field"]?.stringValue
        } catch {
            return "\(error)"
        }
    }

    func testRanges() {
        for good in ["0-0", "0-", "100-199", "18446744073709551615-"] { XCTAssertTrue(RequestRouting.isRange(good), good) }
        for bad in ["", "-", "-5", "5", "9-1", "a-b", "1-2-3", " 1-2", "+1-2", "1-+2"] { XCTAssertFalse(RequestRouting.isRange(bad), bad) }
    }

    func testResolveBecomesConnectTo() throws {
        let r = try routing(["url": "http://a/", "resolve": ["api.test:8080": "127.0.0.1", "v6.test:443": "::1", "b:1": "[::1]"]])
        XCTAssertEqual(r.connectTo, ["api.test:8080:127.0.0.1:8080", "v6.test:443:[::1]:443", "b:1:[::1]:1"])
    }

    func testEachBadFieldIsNamed() {
        XCTAssertEqual(field(of: ["url": "http://a/", "resolve": ["nohost": "1.2.3.4"]]), "resolve.nohost")
        XCTAssertEqual(field(of: ["url": "http://a/", "resolve": ["h:0": "1.2.3.4"]]), "resolve.h:0")
        XCTAssertEqual(field(of: ["url": "http://a/", "resolve": ["h:80": "x y"]]), "resolve.h:80")
        XCTAssertEqual(field(of: ["url": "http://a/", "httpVersion": "3"]), "httpVersion")
        XCTAssertEqual(field(of: ["url": "http://a/", "range": "2-1"]), "range")
        XCTAssertEqual(field(of: ["url": "http://a/", "caFile": "ca.pem"]), "caFile")
        XCTAssertEqual(field(of: ["url": "http://a/", "unixSocket": "s.sock"]), "unixSocket")
        XCTAssertEqual(field(of: ["url": "http://a/", "insecure": "yes"]), "insecure")
        XCTAssertNil(field(of: ["url": "http://a/", "insecure": true, "httpVersion": "1.1", "unixSocket": "/run/x.sock"]))
    }

    func testAppliedToTheEngineRequest() throws {
        var reader = try ParamReader(["url": "http://a/", "insecure": true, "range": "5-", "httpVersion": "2", "unixSocket": "/s"])
        let model = try RequestModel(reading: &reader, allowsBody: true, policy: FilePolicy(allowedDirectories: []))
        let request = model.httpRequest(maxBodyBytes: 1)
        XCTAssertEqual([request.insecure ? "k" : "", request.range ?? "", request.httpVersion?.rawValue ?? "", request.unixSocket ?? ""],
                       ["k", "5-", "2", "/s"])
    }
}
