import FetchEngine
import FoundationEssentials
import JSONRPC

/// A HAR file (HAR 1.2, as fetchd's HTTP logs write it) as stubs: one stub per distinct
/// request (method, URL as sent, body), matching exactly that, whose answers are the
/// entries' responses in the file's order, the last repeating. So identical requests are
/// answered as they were recorded, in order. Entries without an answer (status 0: the
/// connection failed) are left out. Everything is checked before anything is added.
enum HARStubs {
    struct Invalid: Error {
        let reason: String
    }

    /// Headers of a recorded answer that describe how its body crossed the wire, not the
    /// body HAR keeps (decoded, whole): a stub's body is sent as it is.
    static let wireHeaders = ["Content-Length", "Transfer-Encoding", "Content-Encoding"]

    /// The largest HAR (or `--stubs`) file read, checked from its size before any of it is
    /// read: the text is in memory while it is turned into stubs.
    static let maxFileBytes = 64 << 20

    /// A HAR or `--stubs` file's bytes (LocalFile: a regular file, never a wait on a FIFO).
    /// Past `maxFileBytes`: -32602 naming `field`, with `limit`; one that can't be read: -32003.
    static func read(_ path: String, field: String) throws -> [UInt8] {
        do {
            return try LocalFile.read(path, limit: maxFileBytes).bytes
        } catch .tooLarge {
            throw RPCError.invalidParams(field: field, "\(path) is larger than \(maxFileBytes) bytes, the most read from a HAR or stubs file",
                                         limit: maxFileBytes)
        } catch {
            throw error.fileError
        }
    }

    /// A HAR document's text as stubs. The document is never made a tree whole: `HARText`
    /// finds `log.entries` and each entry is parsed on its own, so the memory it takes is
    /// the text, the stubs made and one entry's tree.
    static func stubs(fromText text: [UInt8], set: String) throws(Invalid) -> [StubParams] {
        var grouping = Grouping()
        let scanned = text.withUnsafeBytes { (raw: UnsafeRawBufferPointer) -> Result<Void, Invalid> in
            do throws(Invalid) {
                try HARText.forEachEntry(in: raw) { (index: Int, entryText: UnsafeRawBufferPointer) throws(Invalid) in
                    let entry: JSONValue
                    do {
                        entry = try JSONCodec.decode(entryText)
                    } catch {
                        throw Invalid(reason: "not JSON: log.entries[\(index)]: \(error)")
                    }
                    try grouping.add(entry, at: index)
                }
                return .success(())
            } catch {
                return .failure(error)
            }
        }
        try scanned.get()
        return grouping.stubs(set: set)
    }

    static func stubs(from har: JSONValue, set: String) throws(Invalid) -> [StubParams] {
        guard case .array(let entries)? = har.objectValue?["log"]?.objectValue?["entries"] else {
            throw Invalid(reason: "not HAR: no log.entries array")
        }
        var grouping = Grouping()
        for (index, entry) in entries.enumerated() { try grouping.add(entry, at: index) }
        return grouping.stubs(set: set)
    }

    /// The entries' answers grouped by request, in the file's order.
    private struct Grouping {
        var order: [String] = []
        var grouped: [String: (match: StubMatch, answers: [StubAnswer])] = [:]

        mutating func add(_ entry: JSONValue, at index: Int) throws(Invalid) {
            let at = "log.entries[\(index)]"
            guard let request = entry.objectValue?["request"]?.objectValue,
                  let method = request["method"]?.stringValue, let url = request["url"]?.stringValue else {
                throw Invalid(reason: "\(at).request needs a method and a url")
            }
            guard let response = entry.objectValue?["response"]?.objectValue, let status = response["status"]?.integerValue else {
                throw Invalid(reason: "\(at).response needs a status")
            }
            if status == 0 { return }
            guard (100...599).contains(status) else { throw Invalid(reason: "\(at).response.status \(status) is not an HTTP status") }
            var answer = StubResponse(status: status)
            for header in response["headers"]?.arrayValue ?? [] {
                guard let name = header.objectValue?["name"]?.stringValue, let value = header.objectValue?["value"]?.stringValue else {
                    throw Invalid(reason: "\(at).response.headers: each needs a name and a value")
                }
                if !wireHeaders.contains(where: name.caseInsensitiveEquals) { answer.headers.append(HTTPHeader(name, value)) }
            }
            if let content = response["content"]?.objectValue, let text = content["text"]?.stringValue {
                if content["encoding"]?.stringValue == "base64" {
                    guard let data = Data(base64Encoded: text) else { throw Invalid(reason: "\(at).response.content.text is not valid base64") }
                    answer.body = [UInt8](data)
                } else {
                    answer.body = Array(text.utf8)
                }
            }
            let body = request["postData"]?.objectValue?["text"]?.stringValue ?? ""
            let identity = "\(method) \(url)\n\(body)"
            if grouped[identity] == nil {
                grouped[identity] = (StubMatch.recorded(method: method, url: url, body: body), [])
                order.append(identity)
            }
            grouped[identity]?.answers.append(.respond(answer))
        }

        func stubs(set: String) -> [StubParams] {
            order.compactMap { grouped[$0] }.map { StubParams(set: set, match: $0.match, answers: $0.answers) }
        }
    }
}
