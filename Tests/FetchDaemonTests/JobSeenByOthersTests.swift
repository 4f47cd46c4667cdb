import FetchEngine
import JSONRPC
import XCTest

@testable import FetchDaemon

/// What other clients see of a job (getJob, attach, listJobs, jobEvent), and the ids the
/// daemon gives jobs. Pure: no daemon.
final class JobSeenByOthersTests: XCTestCase {
    private let seen = JobSeenByOthers(url: "https://ann:pw-secret-1@api.test/v1/x?access_token=tok-secret-2&page=2",
                                       headers: [HTTPHeader("Authorization", "Bearer auth-secret-3"),
                                                 HTTPHeader("Cookie", "sid=cookie-secret-4"), HTTPHeader("X-Trace", "t1")])
    private let secrets = ["pw-secret-1", "tok-secret-2", "auth-secret-3", "cookie-secret-4", "set-secret-5"]

    private func text(_ value: JSONValue) -> String {
        String(decoding: JSONCodec.encode(value), as: UTF8.self)
    }

    func testTheURLIsRedactedAsLogsRedactIt() {
        XCTAssertEqual(seen.redactedURL, "https://ann:%3Credacted%3E@api.test/v1/x?access_token=%3Credacted%3E&page=2")
    }

    func testAResultHidesEverySecretAndKeepsTheRest() throws {
        var headers = JSONObjectWriter(capacity: 128)
        headers.add("content-type", "application/json")
        headers.add("set-cookie", "a=set-secret-5; Path=/\nb=2")
        headers.add("location", "/next?code=tok-secret-2")
        let result: JSONValue = [
            "jobId": "job-1", "status": 200, "url": .string(seen.url), "headers": headers.finish(),
            "body": "you sent auth-secret-3 and cookie-secret-4",
            "exchange": [[
                "url": .string(seen.url), "method": "GET",
                "requestHeaders": [["Authorization", "Bearer auth-secret-3"], ["Accept", "*/*"]],
                "responseHeaders": [["Set-Cookie", "a=set-secret-5"]],
            ]],
            "json": ["password": "hunter2-secret", "n": 1],
        ]
        let shown = seen.result(result)
        let written = text(shown)
        for secret in secrets + ["hunter2-secret"] {
            XCTAssertFalse(written.contains(secret), "\(secret) in \(written)")
        }
        XCTAssertEqual(shown["status"], 200)
        XCTAssertEqual(shown["headers"]?["content-type"]?.stringValue, "application/json")
        XCTAssertEqual(shown["headers"]?["set-cookie"]?.stringValue, "<redacted>")
        XCTAssertEqual(shown["headers"]?["location"]?.stringValue, "/next?code=%3Credacted%3E")
        XCTAssertEqual(shown["body"]?.stringValue, "you sent <redacted> and <redacted>")
        XCTAssertEqual(shown["exchange"]?.arrayValue?.first?["requestHeaders"]?.arrayValue?[1], ["Accept", "*/*"])
        XCTAssertEqual(shown["json"]?["n"], 1)
    }

    func testAnErrorHidesWhatTheRequestCarried() {
        let error = RPCError(.transportFailure, "Transfer failed: sent auth-secret-3",
                             data: ["jobId": "job-1", "detail": "to https://ann:pw-secret-1@api.test/", "attempts": 1])
        guard case .failure(let shown) = seen.answer(.failure(error) as Result<JSONValue, RPCError>) else { return XCTFail() }
        XCTAssertEqual(shown.code, .transportFailure)
        XCTAssertEqual(shown.message, "Transfer failed: sent <redacted>")
        XCTAssertEqual(shown.data?["detail"]?.stringValue, "to https://ann:%3Credacted%3E@api.test/")
        XCTAssertEqual(shown.data?["attempts"], 1)
    }

    func testAnEndedJobKeepsItsAnswerWholeAndShowsItRedacted() {
        let result: JSONValue = ["jobId": "j", "url": .string(seen.url), "body": "small"]
        let ended = EndedJob(jobID: "j", state: "finished", durable: false, restarts: 0, answer: .success(result),
                             isFetch: true, seen: seen)
        XCTAssertEqual(try ended.answer.get()["url"]?.stringValue, seen.url)
        let shown = try? ended.answerSeenByOthers.get()
        XCTAssertEqual(shown?["url"]?.stringValue, seen.redactedURL)
        XCTAssertEqual(shown?["bodyOmitted"], true)
    }

    func testGeneratedJobIDsAreRandomHex() {
        let ids = JobIDs()
        let drawn = (0..<200).map { _ in ids.next() }
        XCTAssertEqual(Set(drawn).count, 200)
        for id in drawn {
            XCTAssertEqual(id.utf8.count, 20, id)
            XCTAssertTrue(id.hasPrefix("job-"), id)
            XCTAssertTrue(id.dropFirst(4).allSatisfy { "0123456789abcdef".contains($0) }, id)
        }
    }
}
