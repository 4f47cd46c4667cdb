/// A JSON value. Objects keep their members in order so that answers read the way the
/// protocol documents them; lookups are linear, which is fine for the small objects of RPC.
public enum JSONValue: Sendable {
    case null
    case bool(Bool)
    /// An integer that fits 64 bits, kept exact.
    case integer(Int64)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object(JSONObject)
    /// An object already written as JSON text (`JSONObjectWriter`): the encoder copies it as
    /// it is. The daemon's answers use it for parts that are only ever written out (a
    /// response's headers and timings), which then need no tree of values to build, walk and
    /// free. The decoder never makes one; reading into one decodes it.
    case encoded(EncodedJSON)
}

/// Compact JSON text of one object, made by `JSONObjectWriter` (so valid by construction).
public struct EncodedJSON: Sendable {
    public let bytes: [UInt8]

    /// The object as values (decoded on each call: for the rare reader, not the answer path).
    public var decoded: JSONValue {
        (try? JSONCodec.decode(bytes)) ?? .null
    }
}

/// An ordered JSON object. A later member with the same key as an earlier one replaces it.
public struct JSONObject: Sendable, Equatable, ExpressibleByDictionaryLiteral {
    public private(set) var members: [(key: String, value: JSONValue)]

    public init() { members = [] }

    /// An empty object with room for this many members.
    public init(reservingCapacity capacity: Int) {
        members = []
        members.reserveCapacity(capacity)
    }

    public init(_ members: [(String, JSONValue)]) {
        self.members = []
        for (key, value) in members { self[key] = value }
    }

    /// Members whose keys the caller knows to be distinct (a literal, the parser, answer
    /// headers): taken as they are, with no duplicate search. Checked in debug builds.
    public init(distinctMembers: [(key: String, value: JSONValue)]) {
        assert(Set(distinctMembers.map(\.key)).count == distinctMembers.count, "duplicate key in a JSON object")
        members = distinctMembers
    }

    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self.init(distinctMembers: elements.map { (key: $0.0, value: $0.1) })
    }

    public subscript(key: String) -> JSONValue? {
        get { members.first(where: { $0.key == key })?.value }
        set {
            let index = members.firstIndex(where: { $0.key == key })
            switch (index, newValue) {
            case let (index?, value?): members[index].value = value
            case let (index?, nil): members.remove(at: index)
            case let (nil, value?): members.append((key, value))
            case (nil, nil): break
            }
        }
    }

    /// The object without the members `drop` picks, and whether it picked any: one pass,
    /// and no copy when nothing is dropped.
    /// `keepingRoomFor`: members the caller will append to the result (room is made for them
    /// at once).
    public func removingMembers(where drop: (String) -> Bool, keepingRoomFor extra: Int = 0) -> (object: JSONObject, removed: Bool) {
        guard let first = members.firstIndex(where: { drop($0.key) }) else { return (self, false) }
        var kept = JSONObject()
        kept.members.reserveCapacity(members.count - 1 + extra)
        kept.members.append(contentsOf: members[..<first])
        for member in members[(first + 1)...] where !drop(member.key) { kept.members.append(member) }
        return (kept, true)
    }

    /// Adds a member whose key the caller knows is not there yet (checked in debug builds).
    public mutating func append(distinctKey key: String, _ value: JSONValue) {
        assert(index(forKey: key) == nil, "duplicate key \(key) in a JSON object")
        members.append((key, value))
    }

    public var keys: [String] { members.map(\.key) }

    /// Where the member with this key is in `members`.
    public func index(forKey key: String) -> Int? { members.firstIndex { $0.key == key } }
    public var count: Int { members.count }
    public var isEmpty: Bool { members.isEmpty }

    public static func == (lhs: JSONObject, rhs: JSONObject) -> Bool {
        guard lhs.members.count == rhs.members.count else { return false }
        return lhs.members.allSatisfy { rhs[$0.key] == $0.value }
    }
}

extension JSONValue: Equatable {
    /// JSON equality: an encoded object equals the values it decodes to.
    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): true
        case let (.bool(a), .bool(b)): a == b
        case let (.integer(a), .integer(b)): a == b
        case let (.double(a), .double(b)): a == b
        case let (.string(a), .string(b)): a == b
        case let (.array(a), .array(b)): a == b
        case let (.object(a), .object(b)): a == b
        case let (.encoded(a), .encoded(b)): a.bytes == b.bytes || a.decoded == b.decoded
        case let (.encoded(a), other), let (other, .encoded(a)): a.decoded == other
        default: false
        }
    }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByBooleanLiteral, ExpressibleByFloatLiteral, ExpressibleByArrayLiteral,
    ExpressibleByDictionaryLiteral, ExpressibleByNilLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int64) { self = .integer(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(JSONObject(distinctMembers: elements.map { (key: $0.0, value: $0.1) }))
    }
    public init(nilLiteral: ()) { self = .null }
}

extension JSONValue {
    public init(_ value: Int) { self = .integer(Int64(value)) }
    public init(_ value: String?) { self = value.map(JSONValue.string) ?? .null }

    public var objectValue: JSONObject? {
        switch self {
        case .object(let o): o
        case .encoded(let e): e.decoded.objectValue
        default: nil
        }
    }
    public var arrayValue: [JSONValue]? { if case .array(let a) = self { a } else { nil } }
    public var stringValue: String? { if case .string(let s) = self { s } else { nil } }
    public var boolValue: Bool? { if case .bool(let b) = self { b } else { nil } }
    public var isNull: Bool { self == .null }

    /// The value as a Double when it is a number of either kind.
    public var numberValue: Double? {
        switch self {
        case .integer(let i): Double(i)
        case .double(let d): d
        default: nil
        }
    }

    /// The value as an Int when it is a whole number that fits.
    public var integerValue: Int? {
        switch self {
        case .integer(let i): Int(exactly: i)
        case .double(let d): Int(exactly: d)
        default: nil
        }
    }

    /// The JSON type's name, for error messages.
    public var typeName: String {
        switch self {
        case .null: "null"
        case .bool: "boolean"
        case .integer, .double: "number"
        case .string: "string"
        case .array: "array"
        case .object, .encoded: "object"
        }
    }

    public subscript(key: String) -> JSONValue? { objectValue?[key] }
}
