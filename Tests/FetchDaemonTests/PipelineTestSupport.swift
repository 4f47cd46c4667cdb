@testable import FetchDaemon
import FetchEngine
import Foundation
import Glibc
import JSONRPC
import XCTest

/// A clock the test moves by hand: the monotonic seconds and the wall clock go on together.
final class ManualClock: Sendable {
    private let time = Locked((now: 1_000.0, wall: 1_700_000_000.0))

    var clock: JobClock {
        let time = self.time
        return JobClock(now: { time.withLock { $0.now } }, wall: { Date(timeIntervalSince1970: time.withLock { $0.wall }) })
    }

    var now: Double { time.withLock { $0.now } }
    var wall: Date { Date(timeIntervalSince1970: time.withLock { $0.wall }) }

    func advance(_ seconds: Double) {
        time.withLock {
            $0.now += seconds
            $0.wall += seconds
        }
    }
}

/// Jobs, attempts and outcomes made by hand, as `JobDriver` would hand them to a stage or an
/// observer: no engine, no socket.
enum Fake {
    static func model(_ params: JSONValue) throws -> RequestModel {
        var reader = try ParamReader(params)
        let model = try RequestModel(reading: &reader, allowsBody: true, policy: FilePolicy(allowedDirectories: []))
        try reader.finish()
        return model
    }

    static func job(_ params: JSONValue = ["url": "http://h.test/x"], kind: JobSpec.Kind = .fetch, stages: [any Stage] = [],
                    clock: ManualClock, durableRecord: DurableStore.Record? = nil, id: String = "job-1",
                    notified: (@Sendable (String, JSONValue) -> Void)? = nil) throws -> Job {
        let model = try model(params)
        let spec = JobSpec(kind: kind, model: model, request: model.httpRequest(maxBodyBytes: 1 << 20), stages: stages,
                           durableRecord: durableRecord, answer: JobSpec.Answer(blocking: false) { _, _ in .null })
        let context = RPCContext(connectionID: 7) { method, params in notified?(method, params) }
        return Job(id: id, transferID: 42, connectionID: 7, spec: spec, context: context, clock: clock.clock, reply: { _ in })
    }

    static func attempt(_ job: Job, number: Int = 1) -> Attempt {
        Attempt(number: number, request: job.spec.request)
    }

    static func response(_ status: Int, _ headers: [(String, String)] = [], url: String = "http://h.test/x",
                         body: [UInt8] = []) -> HTTPResponse {
        HTTPResponse(status: status, headers: ResponseHeaders(headers.map { HTTPHeader($0.0, $0.1) }), url: url, body: body,
                     redirects: 0, httpVersion: "1.1", timings: TransferTimings(), sentBytes: 10, receivedBytes: Int64(body.count))
    }

    static func answered(_ status: Int, _ headers: [(String, String)] = [], url: String = "http://h.test/x") -> AttemptOutcome {
        .success(response(status, headers, url: url))
    }

    static func failed(_ kind: TransferError.Kind, _ job: Job, attempts: Int = 1) -> AttemptOutcome {
        .failure(JobFailed(jobID: job.id, attempts: attempts, error: TransferError(kind, "a \(kind) failure")))
    }

    static func temporaryDirectory(_ test: XCTestCase) -> String {
        var template = Array("/tmp/fetchd-pipeline-XXXXXX".utf8CString)
        let dir = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
        test.addTeardownBlock { _ = system("rm -rf '\(dir)'") }
        return dir
    }
}

extension Preparation {
    var isProceed: Bool { if case .proceed = self { true } else { false } }
    var hold: Hold? { if case .hold(let hold) = self { hold } else { nil } }
    var answer: AttemptOutcome? { if case .answer(let outcome) = self { outcome } else { nil } }
}

extension Verdict {
    /// The verdict's case name, for comparisons in tests.
    var name: String {
        switch self {
        case .pass: "pass"
        case .final: "final"
        case .fail: "fail"
        case .again: "again"
        case .next: "next"
        case .follow: "follow"
        }
    }

    var failure: JobFailed? { if case .fail(let error) = self { error as? JobFailed } else { nil } }
}

extension Result where Success == HTTPResponse {
    var jobFailure: JobFailed? { if case .failure(let error) = self { error as? JobFailed } else { nil } }
}
