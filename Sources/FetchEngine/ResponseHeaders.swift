/// A response's headers in the order received, names as the server sent them: every
/// header's bytes in one buffer, each header two ranges of it. Strings are made only for the
/// headers a reader takes as `HTTPHeader`s; the answer's JSON is written from the bytes
/// (`withFields`), and `last(named:)` / `contains(named:)` compare bytes. (Two Strings per
/// header, made in libcurl's header callback for every response, cost about 5k instructions
/// per small GET, and writing them out again about 4k, callgrind says.)
public struct ResponseHeaders: Sendable, RandomAccessCollection, ExpressibleByArrayLiteral, Equatable {
    /// Where one header's name and value are in `bytes`.
    public struct Field: Sendable, Equatable {
        public let nameStart: Int32
        public let valueStart: Int32
        public let valueEnd: Int32
        public var name: Range<Int> { Int(nameStart)..<Int(valueStart) }
        public var value: Range<Int> { Int(valueStart)..<Int(valueEnd) }
    }

    private var bytes: [UInt8] = []
    private var fields: [Field] = []

    public init() {}

    public init(_ headers: [HTTPHeader]) {
        for header in headers { append(header) }
    }

    public init(arrayLiteral headers: HTTPHeader...) {
        self.init(headers)
    }

    /// The same headers in the same order (names with their case, values byte for byte).
    public static func == (a: ResponseHeaders, b: ResponseHeaders) -> Bool {
        a.count == b.count && a.bytes.withUnsafeBufferPointer { x in
            b.bytes.withUnsafeBufferPointer { y in
                zip(a.fields, b.fields).allSatisfy { f, g in
                    x[f.name].elementsEqual(y[g.name]) && x[f.value].elementsEqual(y[g.value])
                }
            }
        }
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int { fields.count }

    public subscript(index: Int) -> HTTPHeader {
        let field = fields[index]
        return bytes.withUnsafeBufferPointer { all in
            HTTPHeader(String(decoding: UnsafeBufferPointer(rebasing: all[field.name]), as: UTF8.self),
                       String(decoding: UnsafeBufferPointer(rebasing: all[field.value]), as: UTF8.self))
        }
    }

    public mutating func append(_ header: HTTPHeader) {
        var name = header.name, value = header.value
        name.withUTF8 { name in value.withUTF8 { value in append(name: name, value: value) } }
    }

    /// A header from its bytes (a name and a value already trimmed).
    public mutating func append(name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>) {
        let nameStart = Int32(truncatingIfNeeded: bytes.count)
        bytes.append(contentsOf: name)
        let valueStart = Int32(truncatingIfNeeded: bytes.count)
        bytes.append(contentsOf: value)
        fields.append(Field(nameStart: nameStart, valueStart: valueStart, valueEnd: Int32(truncatingIfNeeded: bytes.count)))
    }

    public mutating func removeAll(keepingCapacity: Bool = false) {
        bytes.removeAll(keepingCapacity: keepingCapacity)
        fields.removeAll(keepingCapacity: keepingCapacity)
    }

    public mutating func reserveCapacity(headers: Int, bytes count: Int) {
        fields.reserveCapacity(headers)
        bytes.reserveCapacity(count)
    }

    /// The buffer and each header's place in it, for a writer that copies them out.
    public func withFields<R>(_ body: (UnsafeBufferPointer<UInt8>, [Field]) throws -> R) rethrows -> R {
        try bytes.withUnsafeBufferPointer { try body($0, fields) }
    }

    /// The last value of a header, its name matched without regard to case.
    public func last(named name: String) -> String? {
        guard let index = lastIndex(named: name) else { return nil }
        return bytes.withUnsafeBufferPointer { String(decoding: UnsafeBufferPointer(rebasing: $0[fields[index].value]), as: UTF8.self) }
    }

    public func contains(named name: String) -> Bool { lastIndex(named: name) != nil }

    private func lastIndex(named name: String) -> Int? {
        var name = name
        return name.withUTF8 { wanted in
            bytes.withUnsafeBufferPointer { all in
                fields.lastIndex { Self.sameName(UnsafeBufferPointer(rebasing: all[$0.name]), wanted) }
            }
        }
    }

    /// Header names compared as ASCII without case (they are tokens).
    public static func sameName(_ a: UnsafeBufferPointer<UInt8>, _ b: UnsafeBufferPointer<UInt8>) -> Bool {
        guard a.count == b.count else { return false }
        for index in 0..<a.count {
            let x = a[index], y = b[index]
            guard x == y || (x | 0x20 == y | 0x20 && x | 0x20 &- UInt8(ascii: "a") < 26) else { return false }
        }
        return true
    }
}
