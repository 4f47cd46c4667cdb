/// Reads a params object field by field into typed values, tracking the JSON path of each
/// field so that every -32602 names the offending one, and refusing fields nobody read.
///
///     var reader = try ParamReader(params)
///     let url = try reader.requiredString("url")
///     try reader.finish()   // an unknown field (a typo) is an error, never ignored
public struct ParamReader {
    public let object: JSONObject
    public let path: String
    /// Which members were read, by position: the first 64 in a bit mask (no allocation for a
    /// request's params), any further ones in an array.
    private var readMask: UInt64 = 0
    private var readBeyond: [Bool] = []
    /// The byte lengths of the members' keys, one bit each (63: 63 or longer). Most fields a
    /// reader asks for are absent; a length no member has answers without comparing strings.
    private let keyLengths: UInt64

    private static func lengthBit(_ key: String) -> UInt64 { 1 << UInt64(min(key.utf8.count, 63)) }

    public init(_ params: JSONValue?, path: String = "") throws(RPCError) {
        self.path = path
        switch params {
        case nil, .null?: object = JSONObject()
        case .object(let o)?: object = o
        case let other?:
            let where_ = path.isEmpty ? "params" : path
            throw RPCError.invalidParams(field: where_, "expected an object, got \(other.typeName)")
        }
        var lengths: UInt64 = 0
        for member in object.members { lengths |= Self.lengthBit(member.key) }
        keyLengths = lengths
    }

    /// Where the member with this key is, if there is one.
    private func index(of key: String) -> Int? {
        guard keyLengths & Self.lengthBit(key) != 0 else { return nil }
        return object.index(forKey: key)
    }

    /// Whether every member has been read: any field asked for now reads as absent, so a
    /// reader may skip the rest (most requests give a URL and nothing else).
    public var readAll: Bool {
        let count = object.count
        return count <= 64 && readMask == (count == 64 ? UInt64.max : (1 << UInt64(count)) &- 1)
    }

    /// Whether the field is there at all, null included (nothing is marked as read).
    public func isPresent(_ key: String) -> Bool { index(of: key) != nil }

    public func field(_ key: String) -> String {
        if path.isEmpty { return key }
        return "\(path).\(key)"
    }

    public func contains(_ key: String) -> Bool {
        if let index = index(of: key), !object.members[index].value.isNull { return true }
        return false
    }

    /// The raw value of a field (nil when absent); marks it as read.
    public mutating func value(_ key: String) -> JSONValue? {
        guard let index = index(of: key) else { return nil }
        if index < 64 {
            readMask |= 1 << UInt64(index)
        } else {
            if readBeyond.isEmpty { readBeyond = Array(repeating: false, count: object.count - 64) }
            readBeyond[index - 64] = true
        }
        return object.members[index].value
    }

    private func wasRead(_ index: Int) -> Bool {
        index < 64 ? readMask & (1 << UInt64(index)) != 0 : !readBeyond.isEmpty && readBeyond[index - 64]
    }

    /// A field that is absent or null reads as nil.
    private mutating func present(_ key: String) -> JSONValue? {
        guard let value = value(key), !value.isNull else { return nil }
        return value
    }

    public func typeError(_ key: String, expected: String, got value: JSONValue) -> RPCError {
        RPCError.invalidParams(field: field(key), "expected \(expected), got \(value.typeName)")
    }

    public mutating func string(_ key: String) throws(RPCError) -> String? {
        guard let value = present(key) else { return nil }
        guard case .string(let s) = value else { throw typeError(key, expected: "a string", got: value) }
        return s
    }

    public mutating func requiredString(_ key: String) throws(RPCError) -> String {
        guard let s = try string(key) else { throw RPCError.invalidParams(field: field(key), "required") }
        return s
    }

    public mutating func bool(_ key: String) throws(RPCError) -> Bool? {
        guard let value = present(key) else { return nil }
        guard case .bool(let b) = value else { throw typeError(key, expected: "a boolean", got: value) }
        return b
    }

    public mutating func integer(_ key: String, in range: ClosedRange<Int> = Int.min...Int.max) throws(RPCError) -> Int? {
        guard let value = present(key) else { return nil }
        guard let i = value.integerValue else { throw typeError(key, expected: "an integer", got: value) }
        guard range.contains(i) else {
            throw RPCError.invalidParams(field: field(key), "must be between \(range.lowerBound) and \(range.upperBound)")
        }
        return i
    }

    public mutating func number(_ key: String, in range: ClosedRange<Double> = -Double.greatestFiniteMagnitude...Double.greatestFiniteMagnitude) throws(RPCError) -> Double? {
        guard let value = present(key) else { return nil }
        guard let d = value.numberValue else { throw typeError(key, expected: "a number", got: value) }
        guard range.contains(d) else {
            throw RPCError.invalidParams(field: field(key), "must be between \(range.lowerBound) and \(range.upperBound)")
        }
        return d
    }

    public mutating func object(_ key: String) throws(RPCError) -> JSONObject? {
        guard let value = present(key) else { return nil }
        guard case .object(let o) = value else { throw typeError(key, expected: "an object", got: value) }
        return o
    }

    public mutating func array(_ key: String) throws(RPCError) -> [JSONValue]? {
        guard let value = present(key) else { return nil }
        guard case .array(let a) = value else { throw typeError(key, expected: "an array", got: value) }
        return a
    }

    /// A nested reader for an object field.
    public mutating func nested(_ key: String) throws(RPCError) -> ParamReader? {
        guard let o = try object(key) else { return nil }
        return try ParamReader(.object(o), path: field(key))
    }

    /// Throws for the first field that no accessor read.
    public func finish() throws(RPCError) {
        if let unknown = object.members.indices.first(where: { !wasRead($0) }) {
            throw RPCError.invalidParams(field: field(object.members[unknown].key), "unknown field")
        }
    }
}
