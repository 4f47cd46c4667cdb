import Dispatch
import FetchEngine
import FoundationEssentials
import JSONRPC

/// recordStubs: a set's misses go to the network, and each exchange that came back is added
/// to the set (one stub per distinct request, its answers in the order they came, as
/// loadStubs makes them) and to one HAR file that grows, rewritten atomically after each
/// exchange on a queue of its own (never on the engine thread), always redacted as HTTP logs
/// are with `redact`.
final class StubRecording: Sendable {
    let set: String
    let path: String
    private struct State {
        var entries: [JSONValue] = []
        /// The stub made for each distinct request.
        var stubs: [String: String] = [:]
    }
    private let state = Locked(State())
    private let queue = DispatchQueue(label: "fetchd.stub-recording")
    private let log: Logger?
    /// As HTTP logs with bodies on and `redact`.
    static let harSettings = HTTPLog.Settings(enabled: true, directory: "", bodies: true, maxBodyBytes: 64 << 20, redact: true)

    /// Writes the empty document now: a path that can't be written fails here (-32003).
    init(set: String, path: String, log: Logger?) throws {
        self.set = set
        self.path = path
        self.log = log
        try HTTPLog.writeAtomically(JSONCodec.encode(Self.document([])), to: path)
    }

    static func document(_ entries: [JSONValue]) -> JSONValue {
        ["log": [
            "version": "1.2", "creator": ["name": "fetchd", "version": .string(FetchdVersion.text)],
            "pages": [], "entries": .array(entries), "comment": "fetchd recordStubs",
        ]]
    }

    /// What identifies a request among the recorded ones: method, URL as sent, body.
    static func identity(_ request: HTTPRequest) -> (key: String, body: String) {
        let body: String = if case .bytes(let bytes) = request.body { String(decoding: bytes, as: UTF8.self) } else { "" }
        return ("\(request.method) \(request.url)\n\(body)", body)
    }

    /// The stub id for this request's recorded answers, if one was made already.
    func stubID(for key: String) -> String? { state.withLock { $0.stubs[key] } }

    func remember(_ stubID: String, for key: String) { state.withLock { $0.stubs[key] = stubID } }

    /// Adds the exchange to the HAR file (built, encoded and written on the queue).
    func append(_ record: Job.AttemptRecord) {
        queue.async { [self] in
            let har = HARBuilder(settings: Self.harSettings).har(job: Job.Info(id: "record", comment: nil), records: [record], outcome: .succeeded)
            let added = har.objectValue?["log"]?.objectValue?["entries"]?.arrayValue ?? []
            let all = state.withLock { s in
                s.entries += added
                return s.entries
            }
            do {
                try HTTPLog.writeAtomically(JSONCodec.encode(Self.document(all)), to: path)
            } catch {
                log?.error("recordStubs \(path): \(error)")
            }
        }
    }

    /// Waits until every exchange queued so far is written (tests).
    func flush() { queue.sync {} }
}
