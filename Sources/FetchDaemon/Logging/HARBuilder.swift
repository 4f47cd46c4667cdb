import FetchEngine
import FoundationEssentials
import Glibc
import JSONRPC

/// Turns a job's attempt records into a HAR 1.2 document: one entry per attempt and per
/// redirect hop, with headers, query, post data, content and libcurl's timings.
struct HARBuilder {
    enum JobOutcome: Sendable {
        case succeeded
        case failed(String)
        case cancelled(String)

        var text: String {
            switch self {
            case .succeeded: "succeeded"
            case .failed(let why): "failed: \(why)"
            case .cancelled(let by): "cancelled by \(by)"
            }
        }
    }

    let settings: HTTPLog.Settings

    func har(job: Job.Info, records: [Job.AttemptRecord], outcome: JobOutcome) -> JSONValue {
        var entries: [JSONValue] = []
        // A redirect the daemon follows is a record of its own with its attempt's number:
        // its hops go on from the ones before.
        var hopsBefore: [Int: Int] = [:]
        for (recordIndex, record) in records.enumerated() {
            var redaction = Redaction(enabled: settings.redact, ruleSecrets: record.ruleSecrets)
            let hops = hops(of: record)
            redaction.learn(from: record.request, hops: hops)
            let first = hopsBefore[record.number, default: 0]
            hopsBefore[record.number] = first + hops.count
            for (index, hop) in hops.enumerated() {
                let last = index == hops.count - 1
                let cache = last && recordIndex == records.count - 1 ? job.cache ?? [:] : [:]
                entries.append(entry(record: record, hop: hop, hopIndex: first + index, isLast: last, redaction: redaction,
                                     cache: cache))
            }
        }
        var comment = "fetchd job \(job.id): \(outcome.text)"
        if let note = job.comment { comment += " — \(note)" }
        return ["log": [
            "version": "1.2",
            "creator": ["name": "fetchd", "version": .string(FetchdVersion.text)],
            "pages": [],
            "entries": .array(entries),
            "comment": .string(Redaction(enabled: settings.redact).text(comment)),
        ]]
    }

    /// The hops libcurl reported, or one built from the request when none went out (a
    /// connection that failed before any byte was sent).
    private func hops(of record: Job.AttemptRecord) -> [ExchangeHop] {
        let recorded: [ExchangeHop]
        switch record.outcome {
        case .success(let response): recorded = response.exchange
        case .failure(let error): recorded = error.exchange
        }
        if !recorded.isEmpty { return recorded }
        var hop = ExchangeHop(url: record.request.url, method: record.request.method)
        hop.requestHeaders = record.request.headers
        return [hop]
    }

    private func entry(record: Job.AttemptRecord, hop: ExchangeHop, hopIndex: Int, isLast: Bool, redaction: Redaction,
                       cache: JSONObject) -> JSONValue {
        let timings = isLast ? self.timings(of: record) : ["send": 0, "wait": 0, "receive": 0] as JSONObject
        let total = ["blocked", "dns", "connect", "send", "wait", "receive"].reduce(0.0) { sum, key in
            sum + max(0, timings[key]?.numberValue ?? 0)
        }
        var entry: JSONObject = [
            "startedDateTime": .string(ISO8601Format.string(record.startedAt)),
            "time": .double(total),
            "request": request(hop: hop, record: record, redaction: redaction),
            "response": response(hop: hop, record: record, isLast: isLast, redaction: redaction),
            "cache": .object(cache),
            "timings": .object(timings),
            "comment": .string("attempt \(record.number), hop \(hopIndex + 1)"),
        ]
        if isLast, case .failure(let error) = record.outcome {
            entry["_error"] = ["kind": .string(error.kind.rawValue), "detail": .string(redaction.text(error.detail))]
        }
        return .object(entry)
    }

    private func request(hop: ExchangeHop, record: Job.AttemptRecord, redaction: Redaction) -> JSONValue {
        let headers = hop.requestHeaders.map(redaction.header)
        var object: JSONObject = [
            "method": .string(hop.method),
            "url": .string(redaction.url(hop.url)),
            "httpVersion": .string(hop.httpVersion.isEmpty ? "HTTP/1.1" : hop.httpVersion),
            "cookies": .array(requestCookies(hop.requestHeaders, redaction)),
            "headers": .array(headers.map { ["name": .string($0.name), "value": .string($0.value)] }),
            "queryString": .array(Redaction.queryItems(hop.url).map { name, value in
                ["name": .string(name), "value": .string(redaction.field(name: name, value: value))]
            }),
            "headersSize": -1,
            "bodySize": 0,
        ]
        // The body goes with the hops that kept the method (a 303 turns it into a GET).
        if hop.method == record.request.method, let postData = postData(record.request, redaction) {
            object["postData"] = postData.0
            object["bodySize"] = .integer(postData.1)
        }
        return .object(object)
    }

    private func postData(_ request: HTTPRequest, _ redaction: Redaction) -> (JSONValue, Int64)? {
        let mimeType = request.header(named: "Content-Type") ?? "application/octet-stream"
        switch request.body {
        case .none:
            return nil
        case .bytes(let bytes):
            var data: JSONObject = ["mimeType": .string(mimeType), "text": ""]
            let text = String(validating: bytes, as: UTF8.self)
            if mimeType.hasPrefix("application/x-www-form-urlencoded"), let text {
                let items = Redaction.formItems(text)
                data["params"] = .array(items.map { ["name": .string($0.0), "value": .string(redaction.field(name: $0.0, value: $0.1))] })
                data["text"] = .string(URLEncoding.form(items.map { ($0.0, redaction.field(name: $0.0, value: $0.1)) }))
            } else if settings.bodies, let text {
                if mimeType.contains("json"), let json = try? JSONCodec.decode(bytes) {
                    data["text"] = .string(JSONCodec.encodeString(redaction.json(json)))
                } else {
                    data["text"] = .string(redaction.text(String(text.prefix(settings.maxBodyBytes))))
                }
            } else {
                data["comment"] = .string("\(bytes.count) bytes\(settings.bodies ? " of binary data" : "")")
            }
            return (.object(data), Int64(bytes.count))
        case .file(let path), .fileRange(let path, _, _):
            return (["mimeType": .string(mimeType), "text": "", "comment": .string("streamed from \(path)")], -1)
        case .stream(let body):
            let sent = body.source.consumed
            return (["mimeType": .string(mimeType), "text": "", "comment": .string("streamed from a descriptor (\(sent) bytes)")], sent)
        case .multipart(let form):
            let params: [JSONValue] = form.parts.map { part in
                var param: JSONObject = ["name": .string(part.name)]
                if let filename = part.filename { param["fileName"] = .string(filename) }
                if let type = part.contentType { param["contentType"] = .string(type) }
                switch part.source {
                case .bytes(let bytes):
                    if part.filename == nil, let text = String(validating: bytes, as: UTF8.self) {
                        param["value"] = .string(redaction.field(name: part.name, value: text))
                    } else {
                        param["value"] = ""
                        param["comment"] = .string("\(bytes.count) bytes")
                    }
                case .file(let path):
                    param["value"] = ""
                    param["comment"] = .string("streamed from \(path)")
                }
                return .object(param)
            }
            return (["mimeType": "multipart/form-data", "params": .array(params), "text": ""], -1)
        }
    }

    private func response(hop: ExchangeHop, record: Job.AttemptRecord, isLast: Bool, redaction: Redaction) -> JSONValue {
        let headers = hop.responseHeaders.map(redaction.header)
        let mimeType = hop.responseHeaders.last { $0.name.lowercased() == "content-type" }?.value ?? ""
        var content: JSONObject = ["size": 0, "mimeType": .string(mimeType)]
        var bodySize: Int64 = hop.status == 0 ? -1 : 0
        if isLast, case .success(let response) = record.outcome {
            if let download = response.download, download.wroteFile {
                content["size"] = .integer(download.fileBytes)
                content["comment"] = .string("written to a file (\(download.fileBytes) bytes, sha256 \(download.sha256))")
                bodySize = response.receivedBytes
            } else if let streamed = response.streamedBytes {
                content["size"] = .integer(streamed)
                content["comment"] = .string("streamed to the client (\(streamed) bytes)")
                bodySize = response.receivedBytes
            } else {
                content["size"] = JSONValue(response.body.count)
                bodySize = Int64(response.body.count)
                if settings.bodies && !response.body.isEmpty {
                    var kept = Array(response.body.prefix(settings.maxBodyBytes))
                    if kept.count < response.body.count, String(validating: response.body, as: UTF8.self) != nil {
                        // Text cut inside a character: back off to the character's start.
                        while let last = kept.last, last & 0xC0 == 0x80 { kept.removeLast() }
                        if let last = kept.last, last >= 0xC0 { kept.removeLast() }
                    }
                    if let text = String(validating: kept, as: UTF8.self) {
                        content["text"] = .string(redaction.text(text))
                    } else {
                        content["text"] = .string(Data(kept).base64EncodedString())
                        content["encoding"] = "base64"
                    }
                    if kept.count < response.body.count {
                        content["comment"] = .string("the first \(kept.count) of \(response.body.count) bytes")
                    }
                }
            }
        }
        let location = hop.responseHeaders.last { $0.name.lowercased() == "location" }?.value ?? ""
        return [
            "status": JSONValue(hop.status),
            "statusText": .string(hop.statusText),
            "httpVersion": .string(hop.httpVersion.isEmpty ? "HTTP/1.1" : hop.httpVersion),
            "cookies": .array(responseCookies(hop.responseHeaders, redaction)),
            "headers": .array(headers.map { ["name": .string($0.name), "value": .string($0.value)] }),
            "content": .object(content),
            "redirectURL": .string(redaction.url(location)),
            "headersSize": -1,
            "bodySize": .integer(bodySize),
        ]
    }

    /// libcurl's cumulative phase times (microseconds) as HAR's per-phase milliseconds.
    private func timings(of record: Job.AttemptRecord) -> JSONObject {
        let t: TransferTimings
        switch record.outcome {
        case .success(let response): t = response.timings
        case .failure(let error): t = error.timings
        }
        func ms(_ microseconds: Int64) -> JSONValue { .double(Double(max(0, microseconds)) / 1000) }
        let connectEnd = max(t.connect, t.tlsHandshake)
        return [
            "blocked": -1,
            "dns": ms(t.nameLookup),
            "connect": ms(connectEnd - t.nameLookup),
            "ssl": t.tlsHandshake > 0 ? ms(t.tlsHandshake - t.connect) : -1,
            "send": ms(t.preTransfer - connectEnd),
            "wait": ms(t.startTransfer - t.preTransfer),
            "receive": ms(t.total - t.startTransfer),
        ]
    }

    private func requestCookies(_ headers: [HTTPHeader], _ redaction: Redaction) -> [JSONValue] {
        headers.filter { $0.name.lowercased() == "cookie" }.flatMap { header in
            header.value.split(separator: ";").compactMap { pair -> JSONValue? in
                let parts = pair.split(separator: "=", maxSplits: 1)
                guard let name = parts.first?.trimmingBlanks(), !name.isEmpty else { return nil }
                let value = parts.count > 1 ? String(parts[1]) : ""
                return ["name": .string(name), "value": .string(redaction.enabled ? Redaction.mask : value)]
            }
        }
    }

    private func responseCookies(_ headers: [HTTPHeader], _ redaction: Redaction) -> [JSONValue] {
        headers.filter { $0.name.lowercased() == "set-cookie" }.compactMap { header in
            let first = header.value.split(separator: ";").first ?? ""
            let parts = first.split(separator: "=", maxSplits: 1)
            guard let name = parts.first?.trimmingBlanks(), !name.isEmpty else { return nil }
            var cookie: JSONObject = ["name": .string(name), "value": .string(redaction.enabled ? Redaction.mask : (parts.count > 1 ? String(parts[1]) : ""))]
            let lower = header.value.lowercased()
            if lower.contains("httponly") { cookie["httpOnly"] = true }
            if lower.contains("secure") { cookie["secure"] = true }
            return .object(cookie)
        }
    }
}
