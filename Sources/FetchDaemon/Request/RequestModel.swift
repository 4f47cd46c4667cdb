import FetchEngine
import FoundationEssentials
import Glibc
import JSONRPC

/// The request model shared by `fetch`, `download` and `upload` (protocol.md), decoded
/// once from params into typed values.
struct RequestModel: Sendable {
    enum Body: Sendable, Equatable {
        case none
        case json(JSONValue)
        case form([QueryItem])
        case text(String)
        case bytes([UInt8])
        case file(path: String)
    }

    struct QueryItem: Sendable, Equatable {
        let name: String
        let value: String
    }

    /// `retry`: true, false, or an object of overrides of the method's defaults.
    struct RetrySetting: Sendable, Equatable {
        var enabled: Bool?
        var maxAttempts: Int?
        var maxInterval: Double?
        var statuses: [Int]?
        var delay: Double?
        var maxElapsed: Double?
        var allErrors: Bool?
    }

    var url: RequestURL
    var method: String
    var headers: [HTTPHeader] = []
    /// Headers given as null: libcurl's own (Accept, User-Agent...) left out, as curl's `-H 'Name:'`.
    var removedHeaders: [String] = []
    var query: [QueryItem] = []
    var body: Body = .none
    var timeout: Double = 60
    var connectTimeout: Double = 10
    /// Seconds for the whole job, every attempt and retry wait included (nil: no limit).
    var maxTime: Double?
    /// TLS, routing and protocol choices (insecure, caFile, httpVersion, range, resolve,
    /// unixSocket). Most requests have none: kept behind one reference (168 bytes inline
    /// would keep every JobSpec above malloc's large-chunk size, see JobSpec).
    var routing: RequestRouting {
        get { routingBox.value ?? RequestRouting() }
        set { routingBox = Rare(newValue == RequestRouting() ? nil : newValue) }
    }
    private var routingBox = Rare<RequestRouting>(nil)
    /// Whether the request has any of them (else the engine's defaults stand).
    var hasRouting: Bool { routingBox.isPresent }
    var retry = RetrySetting()
    var maxRedirects = 10
    /// nil: no cookies (`false`); otherwise the jar's name.
    var cookieJar: String? = "default"
    var priority = 0
    var progress = false
    /// `exchange: true`: the result carries each hop's request and response headers as sent
    /// and received (fetchctl's -i, -D, -v).
    var exchange = false
    var jobID: String?
    var detach = false
    var comment: String?
    /// false: no auth rule applies to this request.
    var auth = true
    /// The stub set this request is matched against (nil: none, unless the daemon applies one to every request).
    var stubs: String?
    /// The WHATWG fetch cache mode (docs/cache.md).
    var cache = CacheMode.default

    static let bodyFields = ["json", "form", "body", "bodyBase64", "bodyFile"]

    /// Reads the shared fields. `allowsBody` is false for `upload`, whose body is its files.
    init(reading params: inout ParamReader, allowsBody: Bool, policy: FilePolicy) throws {
        let urlText = try params.requiredString("url")
        try HTTPSyntax.checkURLLength(urlText.utf8.count, field: params.field("url"))
        do {
            url = try RequestURL(urlText)
        } catch .malformed(let detail) {
            throw RPCError.invalidParams(field: params.field("url"), "malformed URL: \(detail)")
        } catch .schemeNotAllowed(let scheme) {
            throw NotAllowed(detail: "scheme \"\(scheme)\" is not allowed: only http and https")
        }
        // A request that gave its URL and nothing else (most do): every other field has its
        // default, and thirty lookups of absent fields are skipped (about 4k instructions).
        guard !params.readAll else {
            method = "GET"
            return
        }

        if let method = try params.string("method") {
            try HTTPSyntax.checkMethod(method, field: params.field("method"))
            self.method = method
        } else {
            self.method = ""
        }

        if let headers = try params.object("headers") {
            var budget = HTTPSyntax.HeaderBudget()
            for (name, value) in headers.members {
                let field = params.field("headers") + "." + name
                if case .null = value {
                    _ = try HTTPSyntax.checkHeader(name: name, value: "", field: field)
                    removedHeaders.append(name)
                    continue
                }
                guard case .string(let text) = value else {
                    throw RPCError.invalidParams(field: field, "expected a string, got \(value.typeName)")
                }
                try budget.add(try HTTPSyntax.checkHeader(name: name, value: text, field: field), field: field)
                self.headers.append(HTTPHeader(name, text))
            }
        }

        if let query = try params.object("query") {
            self.query = try Self.items(query, field: params.field("query"))
            let sent = URLEncoding.appendingQuery(self.query.map { ($0.name, $0.value) }, to: url.text)
            try HTTPSyntax.checkURLLength(sent.utf8.count, field: params.field("query"))
        }

        // `json` may be null itself (a JSON body of `null`); the others count when not null.
        let given = Self.bodyFields.filter { $0 == "json" ? params.isPresent($0) : params.contains($0) }
        if !allowsBody, let first = given.first {
            throw RPCError.invalidParams(field: params.field(first), "not accepted here: the body is made of `files` and `fields`")
        }
        if given.count > 1 {
            throw RPCError.invalidParams(field: params.field(given[1]), "only one of json, form, body, bodyBase64, bodyFile may be given")
        }
        if allowsBody {
            body = try Self.readBody(&params, policy: policy)
        }
        if method.isEmpty { method = body == .none ? "GET" : "POST" }

        if let timeout = try params.number("timeout", in: 0.001...86_400) { self.timeout = timeout }
        if let connect = try params.number("connectTimeout", in: 0.001...86_400) { connectTimeout = connect }
        maxTime = try params.number("maxTime", in: 0.001...604_800)
        routing = try RequestRouting(reading: &params, policy: policy)
        retry = try Self.readRetry(&params)
        if let redirects = try params.integer("maxRedirects", in: 0...100) { maxRedirects = redirects }
        switch params.value("cookieJar") {
        case nil, .null?: break
        case .bool(false)?: cookieJar = nil
        case .string(let name)? where !name.isEmpty: cookieJar = name
        case let other?:
            throw RPCError.invalidParams(field: params.field("cookieJar"), "expected a jar name or false, got \(other.typeName)")
        }
        if let priority = try params.integer("priority", in: -1_000_000...1_000_000) { self.priority = priority }
        if let progress = try params.bool("progress") { self.progress = progress }
        if let exchange = try params.bool("exchange") { self.exchange = exchange }
        if let jobID = try params.string("jobId") {
            guard !jobID.isEmpty, jobID.utf8.count <= 200 else {
                throw RPCError.invalidParams(field: params.field("jobId"), "must be 1 to 200 bytes")
            }
            self.jobID = jobID
        }
        if let detach = try params.bool("detach") { self.detach = detach }
        comment = try params.string("comment")
        if let auth = try params.bool("auth") { self.auth = auth }
        if let stubs = try params.string("stubs") {
            guard !stubs.isEmpty, stubs.utf8.count <= 200 else {
                throw RPCError.invalidParams(field: params.field("stubs"), "must be 1 to 200 bytes")
            }
            self.stubs = stubs
        }
        if let mode = try params.string("cache") {
            guard let known = CacheMode(rawValue: mode) else {
                throw RPCError.invalidParams(field: params.field("cache"),
                                             "expected one of \(CacheMode.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            cache = known
        }
    }

    private static func readBody(_ params: inout ParamReader, policy: FilePolicy) throws -> Body {
        if let json = params.value("json") {
            return .json(json)
        }
        if let form = try params.object("form") {
            return .form(try items(form, field: params.field("form")))
        }
        if let text = try params.string("body") {
            return .text(text)
        }
        if let encoded = try params.string("bodyBase64") {
            guard let data = Data(base64Encoded: encoded) else {
                throw RPCError.invalidParams(field: params.field("bodyBase64"), "not valid base64")
            }
            return .bytes([UInt8](data))
        }
        if let path = try params.string("bodyFile") {
            try policy.checkReadable(path, field: params.field("bodyFile"))
            return .file(path: path)
        }
        return .none
    }

    private static func readRetry(_ params: inout ParamReader) throws -> RetrySetting {
        var setting = RetrySetting()
        switch params.value("retry") {
        case nil, .null?: return setting
        case .bool(let on)?: setting.enabled = on
        case .object?:
            guard var reader = try params.nested("retry") else { return setting }
            setting.enabled = true
            setting.maxAttempts = try reader.integer("maxAttempts", in: 1...100)
            setting.maxInterval = try reader.number("maxInterval", in: 0.001...86_400)
            setting.delay = try reader.number("delay", in: 0...86_400)
            setting.maxElapsed = try reader.number("maxElapsed", in: 0.001...86_400)
            setting.allErrors = try reader.bool("allErrors")
            if let statuses = try reader.array("statuses") {
                setting.statuses = try statuses.enumerated().map { index, value in
                    guard let status = value.integerValue, (100...599).contains(status) else {
                        throw RPCError.invalidParams(field: reader.field("statuses") + "[\(index)]", "expected an HTTP status from 100 to 599")
                    }
                    return status
                }
            }
            try reader.finish()
        case let other?:
            throw RPCError.invalidParams(field: params.field("retry"), "expected a boolean or an object, got \(other.typeName)")
        }
        return setting
    }

    /// Query and form values: strings, numbers, booleans, or arrays of them (repeated names).
    static func items(_ object: JSONObject, field: String) throws -> [QueryItem] {
        var items: [QueryItem] = []
        for (name, value) in object.members {
            let path = field + "." + name
            if case .array(let values) = value {
                for (index, element) in values.enumerated() {
                    items.append(QueryItem(name: name, value: try scalarText(element, field: "\(path)[\(index)]")))
                }
            } else {
                items.append(QueryItem(name: name, value: try scalarText(value, field: path)))
            }
        }
        return items
    }

    private static func scalarText(_ value: JSONValue, field: String) throws -> String {
        switch value {
        case .string(let s): return s
        case .bool(let b): return b ? "true" : "false"
        case .integer(let i): return String(i)
        case .double(let d): return d == d.rounded() && abs(d) < 1e15 ? String(Int64(d)) : String(d)
        default:
            throw RPCError.invalidParams(field: field, "expected a string, number or boolean, got \(value.typeName)")
        }
    }
}
