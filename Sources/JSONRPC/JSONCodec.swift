internal import CJansson
internal import CJanssonArena
import FoundationEssentials
import Glibc

/// The one place that calls jansson: bytes to `JSONValue`; and the encoder back to bytes.
public enum JSONCodec {
    public struct DecodingError: Error, Sendable, Equatable {
        public let message: String
    }

    /// Parses one JSON text. An integer that does not fit 64 bits is read as a double, and
    /// only that one: every other integer of the message stays exact (an id of 7 is echoed
    /// as 7, whatever else the message holds).
    public static func decode(_ bytes: UnsafeRawBufferPointer) throws(DecodingError) -> JSONValue {
        let flags = Int(JSON_DECODE_ANY | JSON_ALLOW_NUL)
        var error = json_error_t()
        guard let base = bytes.baseAddress?.assumingMemoryBound(to: CChar.self), bytes.count > 0 else {
            throw DecodingError(message: "empty message")
        }
        // The tree comes from this thread's arena and is given back as soon as it is read.
        let parsed = fetchd_json_arena_loadb(base, bytes.count, flags, &error)
        defer { fetchd_json_arena_release(parsed) }
        if let root = parsed?.assumingMemoryBound(to: json_t.self) {
            return value(of: root)
        }
        // jansson refuses an integer beyond 64 bits, and its one remedy, JSON_DECODE_INT_AS_REAL,
        // makes every integer of the message a real. Instead the integers that do not fit are
        // written as reals ("...e0") in a copy, which is parsed once more: the common case
        // never pays for it.
        guard json_error_code(&error) == json_error_numeric_overflow,
              let widened = WidenedIntegers(bytes.assumingMemoryBound(to: UInt8.self)) else {
            throw DecodingError(message: errorText(error))
        }
        var retryError = json_error_t()
        let reparsed = widened.text.withUnsafeBufferPointer { text in
            text.baseAddress!.withMemoryRebound(to: CChar.self, capacity: text.count) {
                fetchd_json_arena_loadb($0, text.count, flags, &retryError)
            }
        }
        defer { fetchd_json_arena_release(reparsed) }
        guard let root = reparsed?.assumingMemoryBound(to: json_t.self) else {
            throw DecodingError(message: errorText(retryError, columnShift: widened.columnShift(for: retryError)))
        }
        return value(of: root)
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
        var out = ByteSink(capacity: 1024)
        write(value, to: &out)
        return out.bytes(appendingNewline: false)
    }

    /// Compact JSON text and a newline: one line of the protocol.
    public static func encodeLine(_ value: JSONValue) -> [UInt8] {
        var out = ByteSink(capacity: 1024)
        write(value, to: &out)
        return out.bytes(appendingNewline: true)
    }

    fileprivate static func write(_ value: JSONValue, to out: inout ByteSink) {
        switch value {
        case .null: out.append("null")
        case .bool(let b): out.append(b ? "true" : "false")
        case .integer(let i): writeInteger(i, to: &out)
        case .double(let d):
            // JSON has no NaN or infinity.
            if !d.isFinite {
                out.append("null")
            } else if !writeMilliDecimal(d, to: &out) {
                out.append(d.description)
            }
        case .string(let s): writeString(s, to: &out)
        case .array(let items):
            out.append(UInt8(ascii: "["))
            // Read in place: no copy (and retain) of each element to iterate.
            items.withUnsafeBufferPointer { items in
                for index in items.indices {
                    if index > 0 { out.append(UInt8(ascii: ",")) }
                    write(items[index], to: &out)
                }
            }
            out.append(UInt8(ascii: "]"))
        case .object(let object):
            out.append(UInt8(ascii: "{"))
            object.members.withUnsafeBufferPointer { members in
                for index in members.indices {
                    if index > 0 { out.append(UInt8(ascii: ",")) }
                    writeString(members[index].key, to: &out)
                    out.append(UInt8(ascii: ":"))
                    write(members[index].value, to: &out)
                }
            }
            out.append(UInt8(ascii: "}"))
        case .encoded(let text): out.append(text.bytes)
        }
    }

    private static let hexDigits: StaticString = "0123456789abcdef"

    /// Clean runs (nothing to escape) are found eight bytes at a time and copied whole; only
    /// an escape is handled byte by byte. Room for the common case is made once.
    fileprivate static func writeString(_ string: String, to out: inout ByteSink) {
        var string = string
        string.withUTF8 { writeUTF8($0, to: &out) }
    }

    /// A string's UTF-8 bytes (valid UTF-8: the caller checked), quoted and escaped.
    fileprivate static func writeUTF8(_ utf8: UnsafeBufferPointer<UInt8>, to out: inout ByteSink) {
        do {
            let count = utf8.count
            out.reserve(count + 2)
            var p = out.end
            p.pointee = UInt8(ascii: "\"")
            p += 1
            guard let source = utf8.baseAddress else {
                p.pointee = UInt8(ascii: "\"")
                out.setEnd(p + 1)
                return
            }
            var runStart = 0
            var index = 0
            while index < count {
                index = firstByteToEscape(source, from: index, count: count)
                guard index < count else { break }
                p.update(from: source + runStart, count: index - runStart)
                p += index - runStart
                let byte = source[index]
                out.setEnd(p)
                out.reserve(6 + (count - index) + 1)
                p = out.end
                p[0] = 0x5C
                switch byte {
                case 0x22, 0x5C: p[1] = byte; p += 2
                case 0x0A: p[1] = UInt8(ascii: "n"); p += 2
                case 0x0D: p[1] = UInt8(ascii: "r"); p += 2
                case 0x09: p[1] = UInt8(ascii: "t"); p += 2
                case 0x08: p[1] = UInt8(ascii: "b"); p += 2
                case 0x0C: p[1] = UInt8(ascii: "f"); p += 2
                default:
                    p[1] = UInt8(ascii: "u")
                    p[2] = 0x30
                    p[3] = 0x30
                    p[4] = hexDigits.utf8Start[Int(byte >> 4)]
                    p[5] = hexDigits.utf8Start[Int(byte & 0xF)]
                    p += 6
                }
                index += 1
                runStart = index
            }
            p.update(from: source + runStart, count: count - runStart)
            p += count - runStart
            p.pointee = UInt8(ascii: "\"")
            out.setEnd(p + 1)
        }
    }

    /// The index of the first byte at or after `start` that JSON needs escaped (a control
    /// character, `"` or `\`), or `count`. Tests eight bytes per step: a byte below 0x20 or
    /// equal to 0x22 or 0x5C sets the high bit of its lane.
    @inline(__always)
    private static func firstByteToEscape(_ bytes: UnsafePointer<UInt8>, from start: Int, count: Int) -> Int {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        var index = start
        while index + 8 <= count {
            let word = UInt64(littleEndian: UnsafeRawPointer(bytes + index).loadUnaligned(as: UInt64.self))
            let quote = word ^ (ones &* 0x22)
            let backslash = word ^ (ones &* 0x5C)
            // Exact for the lowest flagged lane (borrows only disturb the lanes above it).
            let found = ((word &- ones &* 0x20) & ~word | (quote &- ones) & ~quote | (backslash &- ones) & ~backslash) & highs
            if found != 0 { return index + found.trailingZeroBitCount / 8 }
            index += 8
        }
        while index < count {
            let byte = bytes[index]
            if byte < 0x20 || byte == 0x22 || byte == 0x5C { return index }
            index += 1
        }
        return count
    }

    /// A double that is a whole number of thousandths below 10^9 (timings, elapsedMs), written
    /// without a String: the same text as `description` (the shortest that reads back as the
    /// same double, "5.0" for a whole number), since such a double is the nearest one to that
    /// decimal and no shorter decimal is. False for any other double.
    private static func writeMilliDecimal(_ d: Double, to out: inout ByteSink) -> Bool {
        guard d.magnitude < 1e9 else { return false }
        let scaled = (d * 1000).rounded()
        let thousandths = Int64(scaled)
        guard Double(thousandths) / 1000 == d, d != 0 || d.sign == .plus else { return false }
        writeThousandths(thousandths, to: &out)
        return true
    }

    /// A whole number of thousandths as the decimal `writeMilliDecimal` writes for the double
    /// nearest to it ("5.0", "0.43"), without the double.
    fileprivate static func writeThousandths(_ thousandths: Int64, to out: inout ByteSink) {
        var whole = thousandths / 1000
        var fraction = thousandths % 1000
        if thousandths < 0 {
            out.append(UInt8(ascii: "-"))
            whole = -whole
            fraction = -fraction
        }
        writeInteger(whole, to: &out)
        out.append(UInt8(ascii: "."))
        if fraction == 0 {
            out.append(UInt8(ascii: "0"))
            return
        }
        var digits = 3
        while fraction % 10 == 0 {
            fraction /= 10
            digits -= 1
        }
        out.reserve(3)
        var p = out.end + digits
        out.setEnd(p)
        for _ in 0..<digits {
            p -= 1
            p.pointee = UInt8(ascii: "0") + UInt8(fraction % 10)
            fraction /= 10
        }
    }

    /// Decimal digits straight into the output, without a String.
    private static func writeInteger(_ value: Int64, to out: inout ByteSink) {
        out.reserve(20)
        var magnitude = value.magnitude
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes of scratch, filled from the end
        let written = withUnsafeMutableBytes(of: &digits) { scratch -> Int in
            var at = scratch.count
            repeat {
                at -= 1
                scratch[at] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
            } while magnitude > 0
            if value < 0 {
                at -= 1
                scratch[at] = UInt8(ascii: "-")
            }
            let length = scratch.count - at
            out.end.update(from: scratch.baseAddress!.assumingMemoryBound(to: UInt8.self) + at, count: length)
            return length
        }
        out.setEnd(out.end + written)
    }

    public static func encodeString(_ value: JSONValue) -> String {
        String(decoding: encode(value), as: UTF8.self)
    }

    /// jansson's message and where; `columnShift` takes away what a widened copy added.
    private static func errorText(_ error: json_error_t, columnShift: Int = 0) -> String {
        var copy = error
        let text = withUnsafePointer(to: &copy.text) {
            $0.withMemoryRebound(to: CChar.self, capacity: Int(JSON_ERROR_TEXT_LENGTH)) { String(cString: $0) }
        }
        return "\(text) at line \(error.line), column \(Int(error.column) - columnShift)"
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
            var members: [(key: String, value: JSONValue)] = []
            members.reserveCapacity(json_object_size(json))
            var iterator = json_object_iter(json)
            while let current = iterator {
                let keyBytes = UnsafeRawBufferPointer(
                    start: json_object_iter_key(current), count: json_object_iter_key_len(current))
                let key = String(decoding: keyBytes, as: UTF8.self)
                if let member = json_object_iter_value(current) { members.append((key: key, value: value(of: member))) }
                iterator = json_object_iter_next(json, current)
            }
            return .object(JSONObject(distinctMembers: members))  // jansson keeps the last of duplicate keys
        default:
            return .null
        }
    }
}

/// The encoder's output: a growable run of raw memory, copied into an array once at the end.
private struct ByteSink: ~Copyable {
    private var base: UnsafeMutablePointer<UInt8>
    private var count = 0
    private var capacity: Int

    init(capacity: Int) {
        base = .allocate(capacity: capacity)
        self.capacity = capacity
    }

    deinit { base.deallocate() }

    /// How many bytes are written.
    var written: Int { count }

    /// Lowers the ASCII capitals among the bytes written from offset `start` on.
    mutating func lowercaseASCII(from start: Int) {
        for index in start..<count where base[index] &- UInt8(ascii: "A") < 26 { base[index] |= 0x20 }
    }

    /// Where the next byte goes; valid until the next `reserve`.
    var end: UnsafeMutablePointer<UInt8> { base + count }

    /// Marks the bytes up to `pointer` (inside what was reserved) as written.
    @inline(__always)
    mutating func setEnd(_ pointer: UnsafeMutablePointer<UInt8>) {
        count = pointer - base
    }

    @inline(__always)
    mutating func reserve(_ extra: Int) {
        if count + extra > capacity { grow(extra) }
    }

    private mutating func grow(_ extra: Int) {
        let newCapacity = max(capacity * 2, count + extra)
        let grown = UnsafeMutablePointer<UInt8>.allocate(capacity: newCapacity)
        grown.update(from: base, count: count)
        base.deallocate()
        base = grown
        capacity = newCapacity
    }

    @inline(__always)
    mutating func append(_ byte: UInt8) {
        reserve(1)
        base[count] = byte
        count += 1
    }

    @inline(__always)
    mutating func append(_ text: StaticString) {
        reserve(text.utf8CodeUnitCount)
        (base + count).update(from: text.utf8Start, count: text.utf8CodeUnitCount)
        count += text.utf8CodeUnitCount
    }

    mutating func append(_ bytes: [UInt8]) {
        reserve(bytes.count)
        bytes.withUnsafeBufferPointer { source in
            if let start = source.baseAddress { (base + count).update(from: start, count: source.count) }
        }
        count += bytes.count
    }

    mutating func append(_ text: String) {
        var text = text
        text.withUTF8 { utf8 in
            reserve(utf8.count)
            if let source = utf8.baseAddress { (base + count).update(from: source, count: utf8.count) }
            count += utf8.count
        }
    }

    consuming func bytes(appendingNewline newline: Bool) -> [UInt8] {
        let total = count + (newline ? 1 : 0)
        let source = base
        let written = count
        return [UInt8](unsafeUninitializedCapacity: total) { buffer, initialized in
            guard let target = buffer.baseAddress else { return }
            target.update(from: source, count: written)
            if newline { buffer[written] = UInt8(ascii: "\n") }
            initialized = total
        }
    }
}

/// Writes one JSON object straight to text, member by member, with the encoder's own
/// escaping and number forms: for answer parts that would otherwise be built as a tree of
/// values only to be written out once. Keys must be distinct (checked in debug builds).
public struct JSONObjectWriter: ~Copyable {
    private var out: ByteSink
    private var members = 0
    #if DEBUG
    private var keys: Set<String> = []
    #endif

    public init(capacity: Int = 256) {
        out = ByteSink(capacity: capacity)
        out.append(UInt8(ascii: "{"))
    }

    /// A comma before every member but the first.
    private mutating func separate() {
        if members > 0 { out.append(UInt8(ascii: ",")) }
        members += 1
    }

    private mutating func key(_ key: String) {
        #if DEBUG
        assert(keys.insert(key).inserted, "duplicate key \(key) in a JSON object")
        #endif
        separate()
        JSONCodec.writeString(key, to: &out)
        out.append(UInt8(ascii: ":"))
    }

    public mutating func add(_ key: String, _ value: String) {
        self.key(key)
        JSONCodec.writeString(value, to: &out)
    }

    /// A key given as a literal is copied without an escape scan (it must need none:
    /// checked in debug builds).
    private mutating func key(_ key: StaticString) {
        #if DEBUG
        assert(keys.insert(key.description).inserted, "duplicate key \(key) in a JSON object")
        assert(!key.description.utf8.contains { $0 < 0x20 || $0 == 0x22 || $0 == 0x5C }, "key \(key) needs escaping")
        #endif
        separate()
        out.append(UInt8(ascii: "\""))
        out.append(key)
        out.append(UInt8(ascii: "\""))
        out.append(UInt8(ascii: ":"))
    }

    public mutating func add(_ key: StaticString, _ value: JSONValue) {
        self.key(key)
        JSONCodec.write(value, to: &out)
    }

    /// A number given in whole thousandths (of a millisecond, say), written as the double
    /// `Double(thousandths) / 1000` would be, without making that double.
    public mutating func add(_ key: StaticString, thousandths: Int64) {
        self.key(key)
        JSONCodec.writeThousandths(thousandths, to: &out)
    }

    /// A member whose key is written with ASCII letters in lowercase (header names), without
    /// a lowercased copy of the key. Lowering the escaped text is the same as escaping the
    /// lowered key: escapes are lowercase already.
    public mutating func add(lowercasingKey key: String, _ value: String) {
        var key = key, value = value
        key.withUTF8 { key in value.withUTF8 { value in addValidUTF8(lowercasingKey: key, value) } }
    }

    /// A header as it arrived, from its bytes (no String made): the name lowered. Bytes
    /// that are not ASCII are read as `String(decoding:as: UTF8.self)` reads them (an invalid
    /// sequence becomes U+FFFD), so the answer is always valid UTF-8.
    public mutating func add(lowercasingKeyBytes key: UnsafeBufferPointer<UInt8>, valueBytes value: UnsafeBufferPointer<UInt8>) {
        guard Self.isASCII(key), Self.isASCII(value) else {
            return add(lowercasingKey: String(decoding: key, as: UTF8.self), String(decoding: value, as: UTF8.self))
        }
        addValidUTF8(lowercasingKey: key, value)
    }

    private mutating func addValidUTF8(lowercasingKey key: UnsafeBufferPointer<UInt8>, _ value: UnsafeBufferPointer<UInt8>) {
        #if DEBUG
        assert(keys.insert(String(decoding: key, as: UTF8.self).lowercased()).inserted, "duplicate key in a JSON object")
        #endif
        separate()
        if !Self.writeLowercasedPlain(key, to: &out) {
            let start = out.written
            JSONCodec.writeUTF8(key, to: &out)
            out.lowercaseASCII(from: start)
        }
        out.append(UInt8(ascii: ":"))
        JSONCodec.writeUTF8(value, to: &out)
    }

    /// No byte at or above 0x80; eight bytes per step.
    private static func isASCII(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let base = bytes.baseAddress else { return true }
        let count = bytes.count
        var index = 0
        var any: UInt64 = 0
        while index + 8 <= count {
            any |= UnsafeRawPointer(base + index).loadUnaligned(as: UInt64.self)
            index += 8
        }
        while index < count {
            any |= UInt64(base[index])
            index += 1
        }
        return any & 0x8080_8080_8080_8080 == 0
    }

    /// A key of printable ASCII with nothing to escape (every header name a server sends):
    /// copied, lowered and quoted in one pass. False, with nothing written, for any other.
    private static func writeLowercasedPlain(_ utf8: UnsafeBufferPointer<UInt8>, to out: inout ByteSink) -> Bool {
        do {
            let count = utf8.count
            out.reserve(count + 3)
            let p = out.end
            for index in 0..<count {
                let byte = utf8[index]
                guard byte >= 0x20, byte < 0x7F, byte != 0x22, byte != 0x5C else { return false }
                p[index + 1] = byte &- UInt8(ascii: "A") < 26 ? byte | 0x20 : byte
            }
            p[0] = UInt8(ascii: "\"")
            p[count + 1] = UInt8(ascii: "\"")
            out.setEnd(p + count + 2)
            return true
        }
    }

    public consuming func finish() -> JSONValue {
        out.append(UInt8(ascii: "}"))
        return .encoded(EncodedJSON(bytes: out.bytes(appendingNewline: false)))
    }
}

/// A copy of a JSON text in which every integer that does not fit 64 bits is written as a
/// real: "e0" after its digits, the same value as jansson's JSON_DECODE_INT_AS_REAL would
/// read. Strings are skipped whole; nothing else changes, so what was valid or invalid stays
/// so, and a later error is only moved along its line by the characters added before it.
private struct WidenedIntegers {
    private(set) var text: [UInt8] = []
    /// Where each "e0" went in `text`, with its line (1-based, as jansson counts).
    private var insertions: [(offset: Int, line: Int)] = []

    /// nil when no integer needed widening (the overflow was a real's, like 1e400).
    init?(_ source: UnsafeBufferPointer<UInt8>) {
        let count = source.count
        var index = 0
        var copied = 0  // source[..<copied] is in `text`
        var line = 1
        while index < count {
            switch source[index] {
            case UInt8(ascii: "\""):
                // A string, to its closing quote; an escape skips the byte after its backslash.
                index += 1
                while index < count, source[index] != UInt8(ascii: "\"") {
                    if source[index] == UInt8(ascii: "\\") { index += 1 } else if source[index] == UInt8(ascii: "\n") { line += 1 }
                    index += 1
                }
                index += 1
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                // A number: its integer part, then a real's fraction and exponent, if any.
                let start = index
                index += 1
                while index < count, Self.isDigit(source[index]) { index += 1 }
                let integerEnd = index
                while index < count, Self.isDigit(source[index]) || Self.isRealByte(source[index]) { index += 1 }
                if index == integerEnd && !Self.fitsInt64(UnsafeBufferPointer(rebasing: source[start..<index])) {
                    if text.isEmpty { text.reserveCapacity(count + 64) }
                    text.append(contentsOf: UnsafeBufferPointer(rebasing: source[copied..<index]))
                    insertions.append((text.count, line))
                    text.append(UInt8(ascii: "e"))
                    text.append(UInt8(ascii: "0"))
                    copied = index
                }
            case UInt8(ascii: "\n"):
                line += 1
                index += 1
            default:
                index += 1
            }
        }
        if insertions.isEmpty { return nil }
        text.append(contentsOf: UnsafeBufferPointer(rebasing: source[copied..<count]))
    }

    /// How many characters were added on the error's line before it.
    func columnShift(for error: json_error_t) -> Int {
        2 * insertions.count(where: { $0.line == Int(error.line) && $0.offset < Int(error.position) })
    }

    private static func isDigit(_ byte: UInt8) -> Bool { byte &- UInt8(ascii: "0") < 10 }
    private static func isRealByte(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: ".") || byte == UInt8(ascii: "e") || byte == UInt8(ascii: "E") || byte == UInt8(ascii: "+")
            || byte == UInt8(ascii: "-")
    }

    /// An optional minus and digits, read the way strtoll would: within Int64 or not. Told
    /// by the number of digits, and for 19 of them by comparing with Int64's bounds.
    /// A lone "-" counts as fitting (it is jansson's to refuse).
    static func fitsInt64(_ number: UnsafeBufferPointer<UInt8>) -> Bool {
        let negative = number.first == UInt8(ascii: "-")
        let digits = UnsafeBufferPointer(rebasing: number[(negative ? 1 : 0)...])
        if digits.count != 19 { return digits.count < 19 }
        let bound = negative ? Self.int64MinDigits : Self.int64MaxDigits
        for (digit, limit) in zip(digits, bound) where digit != limit { return digit < limit }
        return true
    }

    private static let int64MaxDigits = Array("9223372036854775807".utf8)
    private static let int64MinDigits = Array("9223372036854775808".utf8)
}
