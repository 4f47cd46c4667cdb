import FetchEngine
import FoundationEssentials
import Glibc
import JSONRPC

/// The fields every result of `fetch`, `download` and `upload` shares.
enum ResponseFields {
    /// Lowercase names; repeats joined by ", ", Set-Cookie lines by "\n" (they contain commas).
    static func headers(_ headers: [HTTPHeader]) -> JSONValue {
        var names: [String] = []
        var values: [String] = []
        names.reserveCapacity(headers.count)
        values.reserveCapacity(headers.count)
        for header in headers {
            let name = lowercased(header.name)
            if let index = names.firstIndex(of: name) {
                values[index] += (name == "set-cookie" ? "\n" : ", ") + header.value
            } else {
                names.append(name)
                values.append(header.value)
            }
        }
        return .object(JSONObject(distinctMembers: zip(names, values).map { (key: $0, value: .string($1)) }))
    }

    /// Header names are ASCII tokens: lowercased without Unicode tables, and not copied
    /// when already lowercase.
    private static func lowercased(_ name: String) -> String {
        var contiguous = name
        let lowered: String? = contiguous.withUTF8 { utf8 in
            guard utf8.contains(where: { $0 &- UInt8(ascii: "A") < 26 }) else { return nil }
            return String(unsafeUninitializedCapacity: utf8.count) { buffer in
                for index in 0..<utf8.count {
                    let byte = utf8[index]
                    buffer[index] = byte &- UInt8(ascii: "A") < 26 ? byte | 0x20 : byte
                }
                return utf8.count
            }
        }
        return lowered ?? name
    }

    static func common(job: Job, response: HTTPResponse) -> JSONObject {
        let elapsed = ContinuousClock.now - job.startedAt
        let ms = Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15
        var result: JSONObject = [
            "jobId": .string(job.id),
            "status": JSONValue(response.status),
            "url": .string(response.url),
            "headers": headers(response.headers),
            "attempts": JSONValue(job.attempts),
            "redirects": JSONValue(response.redirects),
            "elapsedMs": .double((ms * 1000).rounded() / 1000),
            "httpVersion": .string(response.httpVersion),
            "timings": timings(response.timings, queuedMs: job.pipeline.queuedMs),
            "remoteAddress": response.remoteAddress.map(JSONValue.string) ?? .null,
        ]
        if let cache = job.pipeline.cache.outcome { result["cache"] = .string(cache.rawValue) }
        if job.spec.model.exchange {
            result["exchange"] = exchange(job: job, response: response)
            result["sentBytes"] = .integer(response.sentBytes)
        }
        return result
    }

    /// `exchange: true`: each hop of the last attempt, headers in order and as written on
    /// the wire. A credential an auth rule added, and a proxy's, is never shown.
    static func exchange(job: Job, response: HTTPResponse) -> JSONValue {
        var redaction = Redaction(enabled: false, ruleSecrets: job.attemptRecords.last?.ruleSecrets ?? [])
        if let request = job.attemptRecords.last?.request { redaction.learn(from: request, hops: response.exchange) }
        func pairs(_ headers: [HTTPHeader]) -> JSONValue {
            .array(headers.map { header in
                let shown = header.name.lowercased() == "proxy-authorization" ? HTTPHeader(header.name, Redaction.mask)
                    : redaction.header(header)
                return [.string(shown.name), .string(shown.value)]
            })
        }
        return .array(response.exchange.map { hop in
            [
                "url": .string(redaction.url(hop.url)), "method": .string(hop.method), "httpVersion": .string(hop.httpVersion),
                "status": .integer(Int64(hop.status)), "statusText": .string(hop.statusText),
                "requestHeaders": pairs(hop.requestHeaders), "responseHeaders": pairs(hop.responseHeaders),
            ]
        })
    }

    /// curl's time_* of the last attempt, from its start, in milliseconds.
    static func timings(_ t: TransferTimings, queuedMs: Double) -> JSONValue {
        func ms(_ microseconds: Int64) -> JSONValue { .double(Double(max(0, microseconds) / 10) / 100) }
        return [
            "queuedMs": .double(queuedMs), "dnsMs": ms(t.nameLookup), "connectMs": ms(t.connect), "tlsMs": ms(t.tlsHandshake),
            "firstByteMs": ms(t.startTransfer), "totalMs": ms(t.total),
        ]
    }

    static func progress(jobID: String, _ progress: TransferProgress) -> JSONValue {
        [
            "jobId": .string(jobID),
            "sentBytes": .integer(progress.sentBytes),
            "totalSendBytes": progress.totalSendBytes.map(JSONValue.integer) ?? .null,
            "receivedBytes": .integer(progress.receivedBytes),
            "totalReceiveBytes": progress.totalReceiveBytes.map(JSONValue.integer) ?? .null,
        ]
    }
}
