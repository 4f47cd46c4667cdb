internal import CJansson
import Foundation

/// The one place that calls jansson: bytes to `JSONValue`; and the encoder back to bytes.
public enum JSONCodec {
    public struct DecodingError: Error, Sendable, Equatable {
        public let message: String
    }

    /// Parses one JSON text. Integers that do not fit 64 bits are read as doubles
    /// (jansson refuses them otherwise) so a large number is never a parse error.
    public static func decode(_ bytes: UnsafeRawBufferPointer) throws(DecodingError) -> JSONValue {
        let flags = Int(JSON_DECODE_ANY | JSON_ALLOW_NUL)
        var error = json_error_t()
        guard let base = bytes.baseAddress?.assumingMemoryBound(to: CChar.self), bytes.count > 0 else {
            throw DecodingError(message: "empty message")
        }
        if let root = json_loadb(base, bytes.count, flags, &error) {
            defer { fetchd_json_decref(root) }
            return value(of: root)
        }
        let message = errorText(error)
        if message.contains("too big") {
            var retryError = json_error_t()
            if let root = json_loadb(base, bytes.count, flags | Int(JSON_DECODE_INT_AS_REAL), &retryError) {
                defer { fetchd_json_decref(root) }
                return value(of: root)
            }
        }
        throw DecodingError(message: message)
    }

    public static func decode(_ bytes: some Collection<UInt8>) throws(DecodingError) -> JSONValue {
        let array = Array(bytes)
        var result: Result<JSONValue, DecodingError> = .failure(DecodingError(message: "empty message"))
        array.withUnsafeBytes { buffer in
            do throws(DecodingError) { result = .success(try decode(buffer)) } catch { result = .failure(error) }
        }
        return try result.get()
    }

    public static func decode(_ text: String) throws(DecodingError) -> JSONValue {
        try decode(Array(text.utf8))
    }

    /// Compact JSON text (no newline). Written here rather than through jansson: building a
    /// jansson tree allocates a node per value and formats numbers with printf, which cost
    /// more than the encoding itself; doubles come out in Swift's shortest exact form.
    public static func encode(_ value: JSONValue) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        write(value, to: &out)
        return out
    }

    private static func write(_ value: JSONValue, to out: inout [UInt8]) {
        switch value {
        case .null: out.append(contentsOf: [0x6E, 0x75, 0x6C, 0x6C])
        case .bool(let b): out.append(contentsOf: b ? Array("true".utf8) : Array("false".utf8))
        case .integer(let i): out.append(contentsOf: String(i).utf8)
        case .double(let d):
            // JSON has no NaN or infinity.
            if d.isFinite { out.append(contentsOf: d.description.utf8) } else { out.append(contentsOf: [0x6E, 0x75, 0x6C, 0x6C]) }
        case .string(let s): writeString(s, to: &out)
        case .array(let items):
            out.append(UInt8(ascii: "["))
            for (index, item) in items.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                write(item, to: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let object):
            out.append(UInt8(ascii: "{"))
            for (index, member) in object.members.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                writeString(member.key, to: &out)
                out.append(UInt8(ascii: ":"))
                write(member.value, to: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    private static func writeString(_ string: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var string = string
        string.withUTF8 { utf8 in
            // Runs of bytes that need no escaping are copied whole.
            var runStart = 0
            for index in 0..<utf8.count {
                let byte = utf8[index]
                guard byte < 0x20 || byte == 0x22 || byte == 0x5C else { continue }
                if runStart < index { out.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<index])) }
                runStart = index + 1
                out.append(0x5C)
                switch byte {
                case 0x22, 0x5C: out.append(byte)
                case 0x0A: out.append(UInt8(ascii: "n"))
                case 0x0D: out.append(UInt8(ascii: "r"))
                case 0x09: out.append(UInt8(ascii: "t"))
                case 0x08: out.append(UInt8(ascii: "b"))
                case 0x0C: out.append(UInt8(ascii: "f"))
                default:
                    out.append(UInt8(ascii: "u"))
                    out.append(0x30)
                    out.append(0x30)
                    out.append(hexDigits[Int(byte >> 4)])
                    out.append(hexDigits[Int(byte & 0xF)])
                }
            }
            if runStart < utf8.count { out.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart...])) }
        }
        out.append(UInt8(ascii: "\""))
    }

    public static func encodeString(_ value: JSONValue) -> String {
        String(decoding: encode(value), as: UTF8.self)
    }

    private static func errorText(_ error: json_error_t) -> String {
        var copy = error
        let text = withUnsafePointer(to: &copy.text) {
            $0.withMemoryRebound(to: CChar.self, capacity: Int(JSON_ERROR_TEXT_LENGTH)) { String(cString: $0) }
        }
        return "\(text) at line \(error.line), column \(error.column)"
    }

    private static func value(of json: UnsafeMutablePointer<json_t>) -> JSONValue {
        switch fetchd_json_typeof(json) {
        case JSON_NULL: return .null
        case JSON_TRUE: return .bool(true)
        case JSON_FALSE: return .bool(false)
        case JSON_INTEGER: return .integer(Int64(json_integer_value(json)))
        case JSON_REAL: return .double(json_real_value(json))
        case JSON_STRING:
            let length = json_string_length(json)
            let bytes = UnsafeRawBufferPointer(start: json_string_value(json), count: length)
            return .string(String(decoding: bytes, as: UTF8.self))
        case JSON_ARRAY:
            let count = json_array_size(json)
            var items: [JSONValue] = []
            items.reserveCapacity(count)
            for index in 0..<count {
                if let item = json_array_get(json, index) { items.append(value(of: item)) }
            }
            return .array(items)
        case JSON_OBJECT:
            var members: [(String, JSONValue)] = []
            var iterator = json_object_iter(json)
            while let current = iterator {
                let keyBytes = UnsafeRawBufferPointer(
                    start: json_object_iter_key(current), count: json_object_iter_key_len(current))
                let key = String(decoding: keyBytes, as: UTF8.self)
                if let member = json_object_iter_value(current) { members.append((key, value(of: member))) }
                iterator = json_object_iter_next(json, current)
            }
            return .object(JSONObject(uniqueMembers: members))  // jansson keeps the last of duplicate keys
        default:
            return .null
        }
    }
}
