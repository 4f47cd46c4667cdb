import FetchEngine
import FoundationEssentials
import JSONRPC

/// Finds a HAR document's `log.entries` in its text without building the document: a scan
/// of the JSON's structure (strings with their escapes, nesting), handing over each entry's
/// text. Values passed over are checked for their shape, not their contents (the escapes in
/// their strings, the digits of their numbers); each entry is parsed in full by jansson.
enum HARText {
    typealias Invalid = HARStubs.Invalid

    /// Calls `body` with each entry of `log.entries`, in order. Not a JSON object with a
    /// `log` object holding an `entries` array: Invalid (`not HAR: ...`); text that is not
    /// JSON where it is read: Invalid (`not JSON: ...`).
    static func forEachEntry(in text: UnsafeRawBufferPointer,
                             _ body: (Int, UnsafeRawBufferPointer) throws(Invalid) -> Void) throws(Invalid) {
        var scan = Scan(text: text)
        guard scan.peek == Scan.openBrace else { throw Invalid(reason: "not HAR: no log.entries array") }
        var found = false
        try scan.members { (name: String, scan: inout Scan) throws(Invalid) in
            guard name == "log", !found, scan.peek == Scan.openBrace else { return try scan.skipValue() }
            try scan.members { (name: String, scan: inout Scan) throws(Invalid) in
                guard name == "entries", !found, scan.peek == Scan.openBracket else { return try scan.skipValue() }
                found = true
                var index = 0
                try scan.elements { (scan: inout Scan) throws(Invalid) in
                    let start = scan.at
                    try scan.skipValue()
                    try body(index, UnsafeRawBufferPointer(rebasing: text[start..<scan.at]))
                    index += 1
                }
            }
        }
        guard scan.peek == nil else { throw scan.notJSON("text after the document") }
        guard found else { throw Invalid(reason: "not HAR: no log.entries array") }
    }

    struct Scan {
        static let quote: UInt8 = 0x22, backslash: UInt8 = 0x5C, comma: UInt8 = 0x2C, colon: UInt8 = 0x3A
        static let openBrace: UInt8 = 0x7B, closeBrace: UInt8 = 0x7D, openBracket: UInt8 = 0x5B, closeBracket: UInt8 = 0x5D
        /// Deeper nesting than this in a value passed over is refused, as the parser would.
        static let maxDepth = 2048

        let text: UnsafeRawBufferPointer
        var at = 0

        init(text: UnsafeRawBufferPointer) { self.text = text }

        /// The next byte after white space (nil at the end); `at` is moved to it.
        var peek: UInt8? {
            mutating get {
                while at < text.count, text[at] == 0x20 || text[at] == 0x0A || text[at] == 0x0D || text[at] == 0x09 { at += 1 }
                return at < text.count ? text[at] : nil
            }
        }

        func notJSON(_ what: String) -> Invalid {
            Invalid(reason: "not JSON: \(what) at byte \(at)")
        }

        mutating func expect(_ byte: UInt8, _ what: String) throws(Invalid) {
            guard peek == byte else { throw notJSON("expected \(what)") }
            at += 1
        }

        /// An object's members: `member` reads or passes over each value.
        mutating func members(_ member: (String, inout Scan) throws(Invalid) -> Void) throws(Invalid) {
            try expect(Self.openBrace, "an object")
            if peek == Self.closeBrace { at += 1; return }
            while true {
                let name = try string()
                try expect(Self.colon, "':'")
                try member(name, &self)
                switch peek {
                case Self.comma: at += 1
                case Self.closeBrace: at += 1; return
                default: throw notJSON("expected ',' or '}'")
                }
            }
        }

        /// An array's elements: `element` reads or passes over each.
        mutating func elements(_ element: (inout Scan) throws(Invalid) -> Void) throws(Invalid) {
            try expect(Self.openBracket, "an array")
            if peek == Self.closeBracket { at += 1; return }
            while true {
                _ = peek
                try element(&self)
                switch peek {
                case Self.comma: at += 1
                case Self.closeBracket: at += 1; return
                default: throw notJSON("expected ',' or ']'")
                }
            }
        }

        /// A string's value (a member name).
        mutating func string() throws(Invalid) -> String {
            _ = peek
            let start = at
            try skipString()
            let quoted = Array(UnsafeRawBufferPointer(rebasing: text[start..<at]))
            guard case .string(let value)? = (try? JSONCodec.decode([Self.openBracket] + quoted + [Self.closeBracket]))?.arrayValue?.first else {
                throw notJSON("a string that is not valid")
            }
            return value
        }

        /// Passes over a string: from its opening quote to its closing one.
        private mutating func skipString() throws(Invalid) {
            guard peek == Self.quote else { throw notJSON("expected a string") }
            at += 1
            while at < text.count {
                switch text[at] {
                case Self.quote: at += 1; return
                case Self.backslash: at += 2
                case 0..<0x20: throw notJSON("a control character in a string")
                default: at += 1
                }
            }
            throw notJSON("the text ends inside a string")
        }

        /// Passes over one value of any kind, nested ones too, without recursion.
        mutating func skipValue() throws(Invalid) {
            var open: [Bool] = []  // the containers entered and not yet closed: true for an object
            value: while true {
                guard let byte = peek else { throw notJSON("the text ends inside a value") }
                switch byte {
                case Self.openBrace, Self.openBracket:
                    guard open.count < Self.maxDepth else { throw notJSON("nesting deeper than \(Self.maxDepth)") }
                    at += 1
                    let isObject = byte == Self.openBrace
                    if peek == (isObject ? Self.closeBrace : Self.closeBracket) {
                        at += 1
                    } else {
                        open.append(isObject)
                        if isObject {
                            try skipString()
                            try expect(Self.colon, "':'")
                        }
                        continue value
                    }
                case Self.quote:
                    try skipString()
                default:
                    let start = at
                    while at < text.count, Self.isScalarByte(text[at]) { at += 1 }
                    guard Self.isScalar(UnsafeRawBufferPointer(rebasing: text[start..<at])) else { throw notJSON("expected a value") }
                }
                // A value ended: its container's next member or element, or the container's end.
                while let isObject = open.last {
                    switch peek {
                    case Self.comma:
                        at += 1
                        if isObject {
                            try skipString()
                            try expect(Self.colon, "':'")
                        }
                        continue value
                    case isObject ? Self.closeBrace : Self.closeBracket:
                        at += 1
                        open.removeLast()
                    default:
                        throw notJSON(isObject ? "expected ',' or '}'" : "expected ',' or ']'")
                    }
                }
                return
            }
        }

        private static func isScalarByte(_ byte: UInt8) -> Bool {
            (byte >= 0x30 && byte <= 0x39) || (byte | 0x20 >= 0x61 && byte | 0x20 <= 0x7A) || byte == 0x2B || byte == 0x2D || byte == 0x2E
        }

        /// true, false, null or a number's characters.
        private static func isScalar(_ bytes: UnsafeRawBufferPointer) -> Bool {
            guard let first = bytes.first else { return false }
            if first == 0x2D || (first >= 0x30 && first <= 0x39) {
                return bytes.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2B || $0 == 0x2D || $0 == 0x2E || $0 | 0x20 == 0x65 }
            }
            return bytes.elementsEqual("true".utf8) || bytes.elementsEqual("false".utf8) || bytes.elementsEqual("null".utf8)
        }
    }
}
