import FetchEngine
import JSONRPC

/// A job as other clients see it (`listJobs`, `getJob`, `attach`, `jobEvent`): its URLs and
/// headers redacted as HTTP logs redact them with `redact` on (`Redaction`: the userinfo
/// password and secret parameters of every URL, the values of `Authorization`, `Cookie`,
/// `Set-Cookie` and `Proxy-Authorization`, and each secret value learned from the request
/// and its answer wherever else it appears). Any client of the daemon may look at any job,
/// by an id it saw in `listJobs` or a `jobEvent`; only the answer to the request that made
/// the job has them whole. Holds the request's URL and headers (shared, not copied), which
/// the ring of ended jobs keeps too.
struct JobSeenByOthers: Sendable {
    let url: String
    let headers: [HTTPHeader]

    init(url: String = "", headers: [HTTPHeader] = []) {
        self.url = url
        self.headers = headers
    }

    init(_ request: HTTPRequest) {
        self.init(url: request.url, headers: request.headers)
    }

    /// The request's URL, redacted.
    var redactedURL: String { redaction().url(url) }

    private func redaction(learning more: [HTTPHeader] = [], urls: [String] = []) -> Redaction {
        var redaction = Redaction(enabled: true)
        redaction.learn(urls: [url] + urls, headers: headers + more)
        return redaction
    }

    /// The job's answer, redacted: getJob's `result` or `error`, attach's answer.
    func answer(_ answer: Result<JSONValue, RPCError>) -> Result<JSONValue, RPCError> {
        switch answer {
        case .success(let result): .success(self.result(result))
        case .failure(let error): .failure(self.error(error))
        }
    }

    /// The same, for an answer as a job ends with it (errors as the client would get them).
    func answer(_ answer: Result<JSONValue, any Error>) -> Result<JSONValue, any Error> {
        self.answer(answer.mapError { ErrorMapping.rpcError(for: $0) }).mapError { $0 }
    }

    /// A result of fetch, download or upload: its `url`, `headers`, `exchange` and body
    /// text, with what its answer carried learned too (Set-Cookie values, a Location's token).
    func result(_ value: JSONValue) -> JSONValue {
        guard case .object(let object) = Self.plain(value) else { return value }
        let answerHeaders = Self.headers(of: object["headers"])
        let hops = object["exchange"].map(Self.plain)?.arrayValue ?? []
        let hopHeaders = hops.flatMap { hop in
            ["requestHeaders", "responseHeaders"].flatMap { Self.pairs(hop[$0]) }
        }
        let redaction = redaction(learning: answerHeaders + hopHeaders,
                                  urls: [object["url"]?.stringValue].compactMap { $0 } + hops.compactMap { $0["url"]?.stringValue })
        var shown = JSONObject(reservingCapacity: object.members.count)
        for (key, member) in object.members {
            switch (key, member) {
            case ("url", .string(let url)):
                shown[key] = .string(redaction.url(url))
            case ("headers", _):
                guard case .object(let fields) = Self.plain(member) else { shown[key] = member; continue }
                shown[key] = .object(JSONObject(fields.members.map { name, value in
                    (name, value.stringValue.map { .string(redaction.header(HTTPHeader(name, $0)).value) } ?? value)
                }))
            case ("exchange", _):
                shown[key] = .array(hops.map { hop in Self.hop(hop, redaction) })
            case ("body", .string(let text)):
                shown[key] = .string(redaction.text(text))
            case ("json", _):
                shown[key] = redaction.json(member)
            default:
                shown[key] = member
            }
        }
        return .object(shown)
    }

    /// An error: its message and the text members of its data (the URL rule applies to them
    /// already, ErrorMapping; the values learned from the request are masked too).
    func error(_ error: RPCError) -> RPCError {
        let redaction = redaction()
        var data = error.data
        if case .object(let object)? = error.data {
            data = .object(JSONObject(object.members.map { key, value in
                (key, value.stringValue.map { .string(redaction.text($0)) } ?? value)
            }))
        }
        return RPCError(error.code, redaction.text(error.message), data: data)
    }

    private static func hop(_ hop: JSONValue, _ redaction: Redaction) -> JSONValue {
        guard case .object(let object) = hop else { return hop }
        return .object(JSONObject(object.members.map { key, value in
            switch key {
            case "url": return (key, value.stringValue.map { .string(redaction.url($0)) } ?? value)
            case "requestHeaders", "responseHeaders":
                return (key, .array(pairs(value).map { header in
                    let shown = redaction.header(header)
                    return [.string(shown.name), .string(shown.value)]
                }))
            default: return (key, value)
            }
        }))
    }

    /// A result's `headers` object as header lines (Set-Cookie lines were joined by "\n").
    private static func headers(of value: JSONValue?) -> [HTTPHeader] {
        guard let value, case .object(let fields) = plain(value) else { return [] }
        return fields.members.flatMap { name, value -> [HTTPHeader] in
            guard let text = value.stringValue else { return [] }
            let lines = name == "set-cookie" ? text.split(separator: "\n").map(String.init) : [text]
            return lines.map { HTTPHeader(name, $0) }
        }
    }

    /// `[[name, value]...]` (an exchange hop's headers) as header lines.
    private static func pairs(_ value: JSONValue?) -> [HTTPHeader] {
        (value?.arrayValue ?? []).compactMap { pair in
            guard let items = pair.arrayValue, items.count == 2, let name = items[0].stringValue,
                  let value = items[1].stringValue else { return nil }
            return HTTPHeader(name, value)
        }
    }

    /// An object written ahead as text, as the values it stands for.
    private static func plain(_ value: JSONValue) -> JSONValue {
        if case .encoded(let text) = value { return text.decoded }
        return value
    }
}
