import FetchEngine
import FoundationEssentials
import Glibc
import JSONRPC

/// addStub's params, decoded and checked: a stub that could never match or answer (a bad
/// regex, a bodyFile that cannot be read, a header that is not HTTP) is -32602 naming the
/// field, before anything is added. Also what `--stubs FILE` reads, entry by entry.
struct StubParams: Sendable {
    var set = "default"
    var match = StubMatch()
    var answers: [StubAnswer] = []
    var priority = 0
    var times: Int?

    /// A body a stub answers with, from a file: read once, when the stub is added.
    static let maxBodyFileBytes = 64 << 20
    static let maxDelayMs = 600_000

    init(set: String, match: StubMatch, answers: [StubAnswer], priority: Int = 0, times: Int? = nil) {
        self.set = set
        self.match = match
        self.answers = answers
        self.priority = priority
        self.times = times
    }

    init(_ params: JSONValue?, policy: FilePolicy, path: String = "") throws {
        var reader = try ParamReader(params, path: path)
        if let set = try reader.string("set") {
            guard !set.isEmpty, set.utf8.count <= 200 else { throw RPCError.invalidParams(field: reader.field("set"), "must be 1 to 200 bytes") }
            self.set = set
        }
        if var match = try reader.nested("match") {
            self.match = try Self.readMatch(&match)
            try match.finish()
        }
        let given = ["respond", "respondSequence", "fault"].filter { reader.contains($0) }
        guard given.count == 1 else {
            throw RPCError.invalidParams(field: reader.field(given.count > 1 ? given[1] : "respond"),
                                         "exactly one of respond, respondSequence and fault is needed")
        }
        if var respond = try reader.nested("respond") {
            answers = [.respond(try Self.readResponse(&respond, policy: policy))]
        } else if let sequence = try reader.array("respondSequence") {
            guard !sequence.isEmpty else { throw RPCError.invalidParams(field: reader.field("respondSequence"), "needs at least one answer") }
            answers = try sequence.enumerated().map { index, value in
                var item = try ParamReader(value, path: reader.field("respondSequence") + "[\(index)]")
                return .respond(try Self.readResponse(&item, policy: policy))
            }
        } else if let fault = try reader.string("fault") {
            guard let kind = StubFault(rawValue: fault) else {
                throw RPCError.invalidParams(field: reader.field("fault"), "expected one of \(StubFault.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            answers = [.fault(kind)]
        }
        if let priority = try reader.integer("priority", in: -1_000_000...1_000_000) { self.priority = priority }
        times = try reader.integer("times", in: 1...1_000_000_000)
        try reader.finish()
    }

    /// loadStubs' and recordStubs' params: `{set, har}`, the file checked against the policy.
    static func setAndHAR(_ params: JSONValue?, policy: FilePolicy) throws -> (set: String, har: String) {
        var reader = try ParamReader(params)
        let set = try reader.requiredString("set")
        let path = try reader.requiredString("har")
        try reader.finish()
        try policy.checkReadable(path, field: "har")
        return (set, path)
    }

    private static func readMatch(_ reader: inout ParamReader) throws -> StubMatch {
        var match = StubMatch(given: reader.object)
        if let method = try reader.string("method") {
            try HTTPSyntax.checkMethod(method, field: reader.field("method"))
            match.method = method
        }
        let urls = ["url", "urlPrefix", "urlPattern"].filter { reader.contains($0) }
        if urls.count > 1 {
            throw RPCError.invalidParams(field: reader.field(urls[1]), "only one of url, urlPrefix and urlPattern may be given")
        }
        if let url = try reader.string("url") { match.url = .exact(url) }
        if let prefix = try reader.string("urlPrefix") { match.url = .prefix(prefix) }
        if let pattern = try reader.string("urlPattern") {
            do {
                match.url = .pattern(try URLPattern(pattern))
            } catch {
                // The reason says what it is: POSIX syntax (regcomp's words), or what fetchd refuses.
                throw RPCError.invalidParams(field: reader.field("urlPattern"), error.reason)
            }
        }
        if let query = try reader.object("query") {
            match.query = try strings(query, field: reader.field("query"))
        }
        if let headers = try reader.object("headers") {
            match.headers = try strings(headers, field: reader.field("headers"))
        }
        // Any JSON value, null included.
        match.bodyJson = reader.value("bodyJson")
        match.bodyContains = try reader.string("bodyContains")
        return match
    }

    private static func strings(_ object: JSONObject, field: String) throws -> [(name: String, value: String)] {
        try object.members.map { name, value in
            guard case .string(let text) = value else {
                throw RPCError.invalidParams(field: field + "." + name, "expected a string, got \(value.typeName)")
            }
            return (name, text)
        }
    }

    static func readResponse(_ reader: inout ParamReader, policy: FilePolicy) throws -> StubResponse {
        var response = StubResponse()
        if let status = try reader.integer("status", in: 100...599) { response.status = status }
        if let headers = try reader.object("headers") {
            for (name, value) in headers.members {
                let field = reader.field("headers") + "." + name
                guard !name.isEmpty, name.utf8.allSatisfy(HTTPSyntax.isTokenByte) else {
                    throw RPCError.invalidParams(field: field, "not a valid header name")
                }
                // An array: the header repeated (several Set-Cookie lines).
                for item in value.arrayValue ?? [value] {
                    guard case .string(let text) = item else {
                        throw RPCError.invalidParams(field: field, "expected a string or an array of strings, got \(item.typeName)")
                    }
                    try HTTPSyntax.checkFieldValue(text, field: field)
                    response.headers.append(HTTPHeader(name, text))
                }
            }
        }
        let bodies = ["body", "bodyBase64", "json", "bodyFile"].filter { $0 == "json" ? reader.isPresent($0) : reader.contains($0) }
        if bodies.count > 1 {
            throw RPCError.invalidParams(field: reader.field(bodies[1]), "only one of body, bodyBase64, json, bodyFile may be given")
        }
        if let text = try reader.string("body") {
            response.body = Array(text.utf8)
        } else if let encoded = try reader.string("bodyBase64") {
            guard let data = Data(base64Encoded: encoded) else {
                throw RPCError.invalidParams(field: reader.field("bodyBase64"), "not valid base64")
            }
            response.body = [UInt8](data)
        } else if let json = reader.value("json") {
            response.body = JSONCodec.encode(json)
            if !response.headers.contains(where: { $0.name.caseInsensitiveEquals("Content-Type") }) {
                response.headers.append(HTTPHeader("Content-Type", "application/json"))
            }
        } else if let path = try reader.string("bodyFile") {
            let field = reader.field("bodyFile")
            try policy.checkReadable(path, field: field)
            response.body = try readFile(path, field: field)
        }
        if let delay = try reader.integer("delayMs", in: 0...maxDelayMs) { response.delayMs = delay }
        try reader.finish()
        return response
    }

    /// The whole file (LocalFile: a regular file, never a wait on a FIFO, at most
    /// `maxBodyFileBytes`), or -32602 naming the field with the reason.
    private static func readFile(_ path: String, field: String) throws(RPCError) -> [UInt8] {
        do {
            return try LocalFile.read(path, limit: maxBodyFileBytes).bytes
        } catch .tooLarge {
            throw RPCError.invalidParams(field: field, "\(path) is larger than \(maxBodyFileBytes) bytes", limit: maxBodyFileBytes)
        } catch {
            throw RPCError.invalidParams(field: field, "cannot read \(path): \(error.detail)")
        }
    }
}
