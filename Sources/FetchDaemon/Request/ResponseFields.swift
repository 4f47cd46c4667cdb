import FetchEngine
import Foundation
import JSONRPC

/// The fields every result of `fetch`, `download` and `upload` shares.
enum ResponseFields {
    /// Lowercase names; repeats joined by ", ", Set-Cookie lines by "\n" (they contain commas).
    static func headers(_ headers: [HTTPHeader]) -> JSONValue {
        var object = JSONObject()
        for header in headers {
            let name = lowercased(header.name)
            let separator = name == "set-cookie" ? "\n" : ", "
            if case .string(let earlier)? = object[name] {
                object[name] = .string(earlier + separator + header.value)
            } else {
                object[name] = .string(header.value)
            }
        }
        return .object(object)
    }

    /// Header names are ASCII tokens: lowercased without Unicode tables, and not copied
    /// when already lowercase.
    private static func lowercased(_ name: String) -> String {
        guard name.utf8.contains(where: { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") }) else { return name }
        let utf8 = name.utf8
        return String(unsafeUninitializedCapacity: utf8.count) { buffer in
            for (index, byte) in utf8.enumerated() {
                buffer[index] = byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte | 0x20 : byte
            }
            return utf8.count
        }
    }

    static func common(job: Job, response: HTTPResponse, startedAt: ContinuousClock.Instant) -> JSONObject {
        let elapsed = ContinuousClock.now - startedAt
        let ms = Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15
        return [
            "jobId": .string(job.id),
            "status": JSONValue(response.status),
            "url": .string(response.url),
            "headers": headers(response.headers),
            "attempts": JSONValue(job.attempts),
            "redirects": JSONValue(response.redirects),
            "elapsedMs": .double((ms * 1000).rounded() / 1000),
            "httpVersion": .string(response.httpVersion),
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
