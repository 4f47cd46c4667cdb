/// The parse of a pattern that regcomp would accept (URLPattern checks with it too), as a tree.
struct URLPatternParser {
    indirect enum Node: Equatable {
        /// One byte from the set.
        case bytes(ByteSet)
        /// `^`: only at the start of the URL; `$`: only at its end.
        case begin, end
        case empty
        case sequence([Node])
        case either([Node])
        /// nil `most`: any number.
        case repeated(Node, least: Int, most: Int?)
    }

    struct Refused: Error {
        let reason: String
    }

    private let pattern: [UInt8]
    private var index = 0
    private var depth = 0

    init(_ pattern: [UInt8]) {
        self.pattern = pattern
    }

    mutating func parse() throws(Refused) -> Node {
        let node = try alternatives()
        // A `)` with no `(` is an ordinary character (as glibc reads ERE), taken by `atom`.
        guard index == pattern.count else { throw Refused(reason: "unexpected \(Character(UnicodeScalar(pattern[index])))") }
        return node
    }

    private var next: UInt8? { index < pattern.count ? pattern[index] : nil }

    private mutating func alternatives() throws(Refused) -> Node {
        var branches = [try branch()]
        while next == UInt8(ascii: "|") {
            index += 1
            branches.append(try branch())
        }
        return branches.count == 1 ? branches[0] : .either(branches)
    }

    private mutating func branch() throws(Refused) -> Node {
        var items: [Node] = []
        while let byte = next, byte != UInt8(ascii: "|"), !(byte == UInt8(ascii: ")") && depth > 0) {
            var item = try atom()
            while let (least, most) = try quantifier() { item = .repeated(item, least: least, most: most) }
            items.append(item)
        }
        switch items.count {
        case 0: return .empty
        case 1: return items[0]
        default: return .sequence(items)
        }
    }

    private mutating func atom() throws(Refused) -> Node {
        let byte = pattern[index]
        index += 1
        switch byte {
        case UInt8(ascii: "("):
            depth += 1
            let inner = try alternatives()
            guard next == UInt8(ascii: ")") else { throw Refused(reason: "Unmatched ( or \\(") }
            index += 1
            depth -= 1
            return inner
        case UInt8(ascii: "."): return .bytes(ByteSet.all.removing(0))
        case UInt8(ascii: "^"): return .begin
        case UInt8(ascii: "$"): return .end
        case UInt8(ascii: "["): return .bytes(try bracket())
        case UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "?"), UInt8(ascii: "{"):
            throw Refused(reason: "Invalid preceding regular expression")
        case UInt8(ascii: "\\"):
            guard let escaped = next else { throw Refused(reason: "Trailing backslash") }
            index += 1
            switch escaped {
            case UInt8(ascii: "1")...UInt8(ascii: "9"):
                throw Refused(reason: "back-references (\\\(Character(UnicodeScalar(escaped)))) are not allowed: "
                    + "matching them takes backtracking, which can take exponential time")
            case UInt8(ascii: "w"): return .bytes(ByteSet.word)
            case UInt8(ascii: "W"): return .bytes(ByteSet.word.inverted)
            case UInt8(ascii: "s"): return .bytes(ByteSet.posixClass("space")!)
            case UInt8(ascii: "S"): return .bytes(ByteSet.posixClass("space")!.inverted)
            case UInt8(ascii: "b"), UInt8(ascii: "B"), UInt8(ascii: "<"), UInt8(ascii: ">"), UInt8(ascii: "`"), UInt8(ascii: "'"):
                throw Refused(reason: "GNU's word and buffer assertions (\\\(Character(UnicodeScalar(escaped)))) are not supported")
            default: return .bytes(ByteSet(escaped))
            }
        default:
            return .bytes(ByteSet(byte))
        }
    }

    /// `*`, `+`, `?`, `{n}`, `{n,}`, `{n,m}`, `{,m}` after an atom, or nil.
    private mutating func quantifier() throws(Refused) -> (Int, Int?)? {
        switch next {
        case UInt8(ascii: "*"): index += 1; return (0, nil)
        case UInt8(ascii: "+"): index += 1; return (1, nil)
        case UInt8(ascii: "?"): index += 1; return (0, 1)
        case UInt8(ascii: "{"):
            index += 1
            let least = number() ?? 0
            var most: Int? = least
            if next == UInt8(ascii: ",") {
                index += 1
                most = number()
            }
            guard next == UInt8(ascii: "}") else { throw Refused(reason: "Invalid content of \\{\\}") }
            index += 1
            if let most, most < least { throw Refused(reason: "Invalid content of \\{\\}") }
            return (least, most)
        default:
            return nil
        }
    }

    /// Decimal digits, capped well above anything that compiles (RE_DUP_MAX is 32767).
    private mutating func number() -> Int? {
        var value: Int?
        while let byte = next, byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") {
            value = min(1 << 20, (value ?? 0) * 10 + Int(byte - UInt8(ascii: "0")))
            index += 1
        }
        return value
    }

    /// After `[`: the set up to the closing `]` (a `]` first is a member; a backslash is itself).
    private mutating func bracket() throws(Refused) -> ByteSet {
        var set = ByteSet()
        let negated = next == UInt8(ascii: "^")
        if negated { index += 1 }
        var first = true
        while true {
            guard let byte = next else { throw Refused(reason: "Unmatched [, [^, [:, [., or [=") }
            if byte == UInt8(ascii: "]") && !first {
                index += 1
                break
            }
            first = false
            if byte == UInt8(ascii: "["), index + 1 < pattern.count,
               let kind = [UInt8(ascii: ":"), UInt8(ascii: "="), UInt8(ascii: ".")].first(where: { $0 == pattern[index + 1] }) {
                index += 2
                let start = index
                while index + 1 < pattern.count, !(pattern[index] == kind && pattern[index + 1] == UInt8(ascii: "]")) { index += 1 }
                guard index + 1 < pattern.count else { throw Refused(reason: "Unmatched [, [^, [:, [., or [=") }
                let name = String(decoding: pattern[start..<index], as: UTF8.self)
                index += 2
                guard kind == UInt8(ascii: ":") else {
                    throw Refused(reason: "equivalence classes and collating symbols ([=x=], [.x.]) are not supported")
                }
                guard let members = ByteSet.posixClass(name) else { throw Refused(reason: "Invalid character class name") }
                set.formUnion(members)
                continue
            }
            index += 1
            if index + 1 < pattern.count, pattern[index] == UInt8(ascii: "-"), pattern[index + 1] != UInt8(ascii: "]") {
                let last = pattern[index + 1]
                if last == UInt8(ascii: "["), index + 2 < pattern.count,
                   pattern[index + 2] == UInt8(ascii: ".") || pattern[index + 2] == UInt8(ascii: "=") {
                    throw Refused(reason: "equivalence classes and collating symbols ([=x=], [.x.]) are not supported")
                }
                guard last >= byte else { throw Refused(reason: "Invalid range end") }
                index += 2
                for member in byte...last { set.insert(member) }
            } else {
                set.insert(byte)
            }
        }
        return negated ? set.inverted.removing(0) : set
    }
}
