import FetchEngine
import FoundationEssentials
import JSONRPC

/// A HAR file (HAR 1.2, as fetchd's HTTP logs write it) as stubs: one stub per distinct
/// request (method, URL as sent, body), matching exactly that, whose answers are the
/// entries' responses in the file's order, the last repeating. So identical requests are
/// answered as they were recorded, in order. Entries without an answer (status 0: the
/// connection failed) are left out. Everything is checked before anything is added.
enum HARStubs {
    struct Invalid: Error {
        let reason: String
    }

    /// Headers of a recorded answer that describe how its body crossed the wire, not the
    /// body HAR keeps (decoded, whole): a stub's body is sent as it is.
    static let wireHeaders = ["Content-Length", "Transfer-Encoding", "Content-Encoding"]

    /// The largest HAR (or `--stubs`) file read, checked from its size before any of it is
    /// read: the text is in memory while it is turned into stubs.
    static let maxFileBytes = 64 << 20

    /// A HAR or `--stubs` file's bytes (LocalFile: a regular file, never a wait on a FIFO).
    /// Past `maxFileBytes`: -32602 naming `field`, with `limit`; one that can't be read: -32003.
    static func read(_ path: String, field: String) throws -> [UInt8] {
        do {
            return try LocalFile.read(path, limit: maxFileBytes).bytes
        } catch .tooLarge {
            throw RPCError.invalidParams(field: field, "\(path) is larger than \(maxFileBytes) bytes, the most read from a HAR or stubs file",
                                         limit: maxFileBytes)
        } catch {
            throw error.fileError
        }
    }

    /// A HAR document's text as stubs. The document is never made a tree whole: `HARText`
    /// finds `log.entries` and each entry is parsed on its own, so the memory it takes is
    /// the text, the stubs made and one entry's tree.
    static func stubs(fromText text: [UInt8], set: String) throws(Invalid) -> [StubParams] {
        var grouping = Grouping()
        let scanned = text.withUnsafeBytes { (raw: UnsafeRawBufferPointer) -> Result<Void, Invalid> in
            do throws(Invalid) {
                try HARText.forEachEntry(in: raw) { (index: Int, entryText: UnsafeRawBufferPointer) throws(Invalid) in
                    let entry: JSONValue
                    do {
                        entry = try JSONCodec.decode(entryText)
                    } catch {
                        throw Invalid(reason: "not JSON: log.entries[\(index)]: \(error)")
                    }
                    try grouping.add(entry, at: index)
                }
                return .success(())
            } catch {
                return .failure(error)
            }
        }
        try scanned.get()
        return grouping.stubs(set: set)
    }

    static func stubs(from har: JSONValue, set: String) throws(Invalid) -> [StubParams] {
        guard case .array(let entries)? = har.objectValue?["log"]?.objectValue?["entries"] else {
            throw Invalid(reason: "not HAR: no log.entries array")
        }
        var grouping = Grouping()
        for (index, entry) in entries.enumerated() { try grouping.add(entry, at: index) }
        return grouping.stubs(set: set)
    }

    /// The entries' answers grouped by request, in the file's order.
    private struct Grouping {
        var order: [String] = []
        var grouped: [String: (match: StubMatch, answers: [StubAnswer])] = [:]

        mutating func add(_ entry: JSONValue, at index: Int) throws(Invalid) {
            let at = "log.entries[\(index)]"
            guard let request = entry.objectValue?["request"]?.objectValue,
                  let method = request["method"]?.stringValue, let url = request["url"]?.stringValue else {
                throw Invalid(reason: "\(at).request needs a method and a url")
            }
            guard let response = entry.objectValue?["response"]?.objectValue, let status = response["status"]?.integerValue else {
                throw Invalid(reason: "\(at).response needs a status")
            }
            if status == 0 { return }
            guard (100...599).contains(status) else { throw Invalid(reason: "\(at).response.status \(status) is not an HTTP status") }
            var answer = StubResponse(status: status)
            for header in response["headers"]?.arrayValue ?? [] {
                guard let name = header.objectValue?["name"]?.stringValue, let value = header.objectValue?["value"]?.stringValue else {
                    throw Invalid(reason: "\(at).response.headers: each needs a name and a value")
                }
                if !wireHeaders.contains(where: name.caseInsensitiveEquals) { answer.headers.append(HTTPHeader(name, value)) }
            }
            if let content = response["content"]?.objectValue, let text = content["text"]?.stringValue {
                if content["encoding"]?.stringValue == "base64" {
                    guard let data = Data(base64Encoded: text) else { throw Invalid(reason: "\(at).response.content.text is not valid base64") }
                    answer.body = [UInt8](data)
                } else {
                    answer.body = Array(text.utf8)
                }
            }
            let body = request["postData"]?.objectValue?["text"]?.stringValue ?? ""
            let identity = "\(method) \(url)\n\(body)"
            if grouped[identity] == nil {
                grouped[identity] = (StubMatch.recorded(method: method, url: url, body: body), [])
                order.append(identity)
            }
            grouped[identity]?.answers.append(.respond(answer))
        }

        func stubs(set: String) -> [StubParams] {
            order.compactMap { grouped[$0] }.map { StubParams(set: set, match: $0.match, answers: $0.answers) }
        }
    }
}

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
