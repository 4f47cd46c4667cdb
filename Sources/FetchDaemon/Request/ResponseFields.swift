import FetchEngine
import FoundationEssentials
import Glibc
import JSONRPC

/// The fields every result of `fetch`, `download` and `upload` shares.
enum ResponseFields {
    /// Lowercase names; repeats joined by ", ", Set-Cookie lines by "\n" (they contain commas).
    /// Written as text at once (the answer only ever writes it out), from the bytes as they
    /// arrived, names lowered as they are written: no Strings, no tree of values.
    static func headers(_ headers: ResponseHeaders) -> JSONValue {
        headers.withFields { bytes, fields in
            var object = JSONObjectWriter(capacity: 32 + bytes.count + fields.count * 8)
            guard fields.count <= pairwiseHeaderLimit else {
                // A server may send thousands of headers (up to HTTPLimits.responseHeaderBytes):
                // grouped through a dictionary, so the work stays linear in their number.
                var order: [String] = []
                var joined: [String: String] = [:]
                for header in headers {
                    let name = header.name.lowercased()
                    if joined[name] == nil {
                        order.append(name)
                        joined[name] = header.value
                    } else {
                        joined[name]!.append((name == "set-cookie" ? "\n" : ", ") + header.value)
                    }
                }
                for name in order { object.add(name, joined[name]!) }
                return object.finish()
            }
            func name(_ index: Int) -> UnsafeBufferPointer<UInt8> { UnsafeBufferPointer(rebasing: bytes[fields[index].name]) }
            for index in fields.indices {
                let own = name(index)
                // A repeat was joined to the first header of its name.
                guard !(0..<index).contains(where: { ResponseHeaders.sameName(name($0), own) }) else { continue }
                let later = (index + 1)..<fields.count
                guard later.contains(where: { ResponseHeaders.sameName(name($0), own) }) else {
                    object.add(lowercasingKeyBytes: own, valueBytes: UnsafeBufferPointer(rebasing: bytes[fields[index].value]))
                    continue
                }
                let repeats = later.filter { ResponseHeaders.sameName(name($0), own) }
                let first = headers[index]
                let separator = first.name.caseInsensitiveEquals("set-cookie") ? "\n" : ", "
                let value = ([first.value] + repeats.map { headers[$0].value }).joined(separator: separator)
                object.add(lowercasingKey: first.name, value)
            }
            return object.finish()
        }
    }

    /// Up to this many headers (every ordinary response) are grouped by comparing names
    /// pairwise, with no dictionary and no lowered copies.
    static let pairwiseHeaderLimit = 32

    static func common(job: Job, response: HTTPResponse) -> JSONObject {
        let ms = job.elapsed * 1000
        // Room for every member an answer gets (these, cache, exchange, the body's): a literal
        // would be sized to its own ten and grow again for the next.
        var result = JSONObject(reservingCapacity: 16)
        result.append(distinctKey: "jobId", .string(job.id))
        result.append(distinctKey: "status", JSONValue(response.status))
        result.append(distinctKey: "url", .string(response.url))
        result.append(distinctKey: "headers", headers(response.headers))
        result.append(distinctKey: "attempts", JSONValue(job.attempts))
        result.append(distinctKey: "redirects", JSONValue(response.redirects))
        result.append(distinctKey: "elapsedMs", .double((ms * 1000).rounded() / 1000))
        result.append(distinctKey: "httpVersion", .string(response.httpVersion))
        let report = job.report
        result.append(distinctKey: "timings", timings(response.timings, queuedMs: report.queuedMs))
        result.append(distinctKey: "remoteAddress", response.remoteAddress.map(JSONValue.string) ?? .null)
        if let cache = report.cache { result["cache"] = .string(cache.rawValue) }
        if let stub = report.stub { result["stub"] = .string(stub) }
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
        // Milliseconds to two places, as the doubles `Double(us / 10) / 100` (written without them).
        func ms(_ microseconds: Int64) -> Int64 { max(0, microseconds) / 10 * 10 }
        var object = JSONObjectWriter(capacity: 128)
        object.add("queuedMs", .double(queuedMs))
        object.add("dnsMs", thousandths: ms(t.nameLookup))
        object.add("connectMs", thousandths: ms(t.connect))
        object.add("tlsMs", thousandths: ms(t.tlsHandshake))
        object.add("firstByteMs", thousandths: ms(t.startTransfer))
        object.add("totalMs", thousandths: ms(t.total))
        return object.finish()
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
