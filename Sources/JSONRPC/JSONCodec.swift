internal import CJansson
import Foundation

/// The one place that calls jansson: bytes to `JSONValue` and back.
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

    /// Compact JSON text (no newline).
    public static func encode(_ value: JSONValue) -> [UInt8] {
        var precision = 15
        guard let root = janssonValue(value, precision: &precision) else { return Array("null".utf8) }
        defer { fetchd_json_decref(root) }
        guard let text = json_dumps(root, fetchd_json_dumps_flags(Int32(precision))) else { return Array("null".utf8) }
        defer { free(text) }
        let length = strlen(text)
        return Array(UnsafeRawBufferPointer(start: text, count: length))
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
            return .object(JSONObject(members))
        default:
            return .null
        }
    }

    /// Builds jansson's tree. `precision` rises from 15 to 17 significant digits only when a
    /// double needs more to read back exactly, so 0.493 is written "0.493", not
    /// "0.49299999999999999", and no double loses a bit.
    private static func janssonValue(_ value: JSONValue, precision: inout Int) -> UnsafeMutablePointer<json_t>? {
        switch value {
        case .null: return json_null()
        case .bool(let b): return b ? json_true() : json_false()
        case .integer(let i): return json_integer(json_int_t(i))
        case .double(let d):
            // JSON has no NaN or infinity; a whole double that fits is written as an integer.
            guard d.isFinite else { return json_null() }
            while precision < 17, Double(String(format: "%.\(precision)g", d)) != d { precision += 1 }
            return json_real(d)
        case .string(let s):
            var s = s
            return s.withUTF8 { utf8 in
                utf8.withMemoryRebound(to: CChar.self) { json_stringn_nocheck($0.baseAddress ?? emptyCString, $0.count) }
            }
        case .array(let items):
            let array = json_array()
            for item in items {
                if let element = janssonValue(item, precision: &precision) { json_array_append_new(array, element) }
            }
            return array
        case .object(let object):
            let result = json_object()
            for (key, member) in object.members {
                guard let element = janssonValue(member, precision: &precision) else { continue }
                var key = key
                key.withUTF8 { utf8 in
                    utf8.withMemoryRebound(to: CChar.self) {
                        _ = json_object_setn_new_nocheck(result, $0.baseAddress ?? emptyCString, $0.count, element)
                    }
                }
            }
            return result
        }
    }
}

/// jansson wants a pointer even for zero bytes.
private nonisolated(unsafe) let emptyCString: UnsafePointer<CChar> = {
    let p = UnsafeMutablePointer<CChar>.allocate(capacity: 1)
    p.initialize(to: 0)
    return UnsafePointer(p)
}()
