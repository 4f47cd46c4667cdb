import FoundationEssentials
import JSONRPC

/// How an answer carries a response's body (`responseBody`, `maxBodyBytes`): decoded and
/// encoded here for every method that returns a body (fetch, upload, a download's non-2xx).
enum ResponseBody {
    enum Mode: String, CaseIterable, Sendable {
        case auto, text, base64, json, none
        /// `responseHead`, then `bodyChunk` notifications (`NotificationDelivery`; fetch only).
        case stream
        /// `responseHead`, then a `bodyLine` notification per line (`LinesDelivery`; fetch only).
        case lines
        /// Server-Sent Events: `sseEvent` notifications, reconnecting (`EventsDelivery`; fetch only).
        case events

        /// The body goes to the client as it arrives, not in the answer.
        var streams: Bool { self == .stream || self == .lines || self == .events }
    }

    /// `responseBody` and `maxBodyBytes`. `streaming`: the method takes the modes that stream
    /// (fetch).
    static func readOptions(_ reader: inout ParamReader, streaming: Bool = false) throws -> (Mode, Int) {
        var mode = Mode.auto
        if let text = try reader.string("responseBody") {
            guard let parsed = Mode(rawValue: text), streaming || !parsed.streams else {
                let choices = Mode.allCases.filter { streaming || !$0.streams }.map(\.rawValue).joined(separator: ", ")
                throw RPCError.invalidParams(field: reader.field("responseBody"), "expected one of \(choices)")
            }
            mode = parsed
        }
        let limit = try reader.integer("maxBodyBytes", in: 0...(1 << 30)) ?? 64 << 20
        return (mode, limit)
    }

    /// auto: text when the bytes are UTF-8, else base64. json: parsed; when the body is not
    /// JSON it comes back as auto would, with `jsonError` saying why.
    static func add(_ body: [UInt8], mode: Mode, to result: inout JSONObject) {
        switch mode {
        case .none, .stream, .lines, .events: break
        case .base64: result.append(distinctKey: "bodyBase64", .string(Data(body).base64EncodedString()))
        case .text: result.append(distinctKey: "body", .string(String(decoding: body, as: UTF8.self)))
        case .auto: addAuto(body, to: &result)
        case .json:
            do {
                result.append(distinctKey: "json", try JSONCodec.decode(body))
            } catch {
                result.append(distinctKey: "jsonError", .string(error.message))
                addAuto(body, to: &result)
            }
        }
    }

    private static func addAuto(_ body: [UInt8], to result: inout JSONObject) {
        if let text = String(validating: body, as: UTF8.self) {
            result.append(distinctKey: "body", .string(text))
        } else {
            result.append(distinctKey: "bodyBase64", .string(Data(body).base64EncodedString()))
        }
    }
}
