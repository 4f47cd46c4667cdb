import Glibc

/// A stub's `urlPattern`: a POSIX extended regular expression, searched for anywhere in the
/// URL as sent (anchor it with ^ and $), byte by byte as in the C locale.
///
/// Matching is bounded whatever the pattern and the URL. The pattern is compiled once, at
/// addStub, into an automaton of at most `maxStates` states (Thompson's construction); a URL
/// is matched in one pass over its bytes that keeps the set of states the automaton may be in
/// (as RE2 and Go's regexp do): at most `states` steps per byte, no backtracking, and no
/// memory beyond two lists of `states` entries. glibc's regexec, by comparison, backtracks
/// for back-references (`(a*)*\1b` took 13 s to miss on a URL of 170 `a`s), starts its
/// search again at every position (`[a-z]+/items` on 64 KiB of `a`s: 8.6 s), and keeps every
/// automaton state it builds for as long as the pattern lives (174 MB after five 4 KiB
/// URLs on one pattern). A match can also be run in slices (`Run`), so a long one is never
/// in the way of other work.
///
/// regcomp still checks the syntax, so a pattern is accepted only when POSIX (glibc) accepts
/// it. Refused besides: back-references (they need backtracking), GNU's word assertions
/// (`\b`, `\B`, `\<`, `\>`, `` \` ``, `\'`), `[=x=]` and `[.x.]`, and patterns of more than
/// `maxStates` states (`{n,m}` repeats what it applies to up to m times).
final class URLPattern: Sendable {
    /// What one pattern may compile to: the bound of the steps per byte of a URL.
    static let maxStates = 1_000

    let source: String
    let program: URLPatternProgram

    /// The automaton's size: the most steps one byte of a URL can take.
    var states: Int { program.instructions.count }

    struct Invalid: Error {
        /// Why, as the client reads it after the field's name.
        let reason: String
    }

    init(_ source: String) throws(Invalid) {
        let bytes = Array(source.utf8)
        let tree: URLPatternParser.Node
        do {
            var parser = URLPatternParser(bytes)
            tree = try parser.parse()
        } catch {
            // POSIX's own words for what it refuses, else this matcher's reason.
            if let refused = Self.posixError(source) { throw Invalid(reason: "not a POSIX extended regular expression: \(refused)") }
            throw Invalid(reason: error.reason)
        }
        let size = URLPatternProgram.size(of: tree)
        guard size <= Self.maxStates else {
            throw Invalid(reason: "the pattern compiles to \(size > Self.maxStates * 1000 ? "over \(Self.maxStates * 1000)" : "\(size)") states, "
                + "more than \(Self.maxStates) (each {n,m} repeats what it applies to up to m times): "
                + "use a shorter pattern, or urlPrefix and query")
        }
        if let refused = Self.posixError(source) {
            throw Invalid(reason: "not a POSIX extended regular expression: \(refused)")
        }
        self.source = source
        program = URLPatternProgram(tree)
    }

    /// regcomp's reason for refusing `source`, or nil when it compiles.
    private static func posixError(_ source: String) -> String? {
        var regex = regex_t()
        let code = regcomp(&regex, source, REG_EXTENDED | REG_NOSUB)
        guard code != 0 else {
            regfree(&regex)
            return nil
        }
        var text = [CChar](repeating: 0, count: 256)
        regerror(code, &regex, &text, text.count)
        return String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    func matches(_ text: String) -> Bool {
        var text = text
        return text.withUTF8 { bytes in
            var position = 0, budget = Int.max
            return URLPatternProgram.Lists(size: states).run(program, bytes, from: &position, budget: &budget) ?? false
        }
    }

    /// One URL being matched, a slice at a time: `resume` spends at most about `budget` steps
    /// and answers nil when it needs more.
    struct Run: Sendable {
        let program: URLPatternProgram
        let text: [UInt8]
        private var position = 0
        private var lists: URLPatternProgram.Lists?

        init(_ pattern: URLPattern, _ text: String) {
            program = pattern.program
            self.text = Array(text.utf8)
        }

        /// Steps this match takes at most (its bytes, and the end, times the states).
        var worstSteps: Int { (text.count + 1) * program.instructions.count }

        mutating func resume(budget: inout Int) -> Bool? {
            let lists = self.lists ?? URLPatternProgram.Lists(size: program.instructions.count)
            var position = self.position
            let program = self.program
            let found = text.withUnsafeBufferPointer { bytes in
                lists.run(program, bytes, from: &position, budget: &budget)
            }
            self.position = position
            // Kept only while the match goes on.
            self.lists = found == nil ? lists : nil
            return found
        }
    }
}

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

/// A set of bytes, as four 64-bit words.
struct ByteSet: Sendable, Equatable {
    private var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)

    init() {}

    init(_ byte: UInt8) {
        insert(byte)
    }

    static var all: ByteSet {
        var set = ByteSet()
        set.words = (.max, .max, .max, .max)
        return set
    }

    func contains(_ byte: UInt8) -> Bool {
        let bit = UInt64(1) << UInt64(byte & 63)
        switch byte >> 6 {
        case 0: return words.0 & bit != 0
        case 1: return words.1 & bit != 0
        case 2: return words.2 & bit != 0
        default: return words.3 & bit != 0
        }
    }

    mutating func insert(_ byte: UInt8) {
        let bit = UInt64(1) << UInt64(byte & 63)
        switch byte >> 6 {
        case 0: words.0 |= bit
        case 1: words.1 |= bit
        case 2: words.2 |= bit
        default: words.3 |= bit
        }
    }

    mutating func formUnion(_ other: ByteSet) {
        words = (words.0 | other.words.0, words.1 | other.words.1, words.2 | other.words.2, words.3 | other.words.3)
    }

    var inverted: ByteSet {
        var set = ByteSet()
        set.words = (~words.0, ~words.1, ~words.2, ~words.3)
        return set
    }

    func removing(_ byte: UInt8) -> ByteSet {
        var set = self
        let bit = UInt64(1) << UInt64(byte & 63)
        if byte >> 6 == 0 { set.words.0 &= ~bit }
        if byte >> 6 == 1 { set.words.1 &= ~bit }
        if byte >> 6 == 2 { set.words.2 &= ~bit }
        if byte >> 6 == 3 { set.words.3 &= ~bit }
        return set
    }

    /// The only member, when there is exactly one.
    var single: UInt8? {
        let counts = [words.0.nonzeroBitCount, words.1.nonzeroBitCount, words.2.nonzeroBitCount, words.3.nonzeroBitCount]
        guard counts.reduce(0, +) == 1, let word = counts.firstIndex(of: 1) else { return nil }
        let value = [words.0, words.1, words.2, words.3][word]
        return UInt8(word * 64 + value.trailingZeroBitCount)
    }

    static func == (a: ByteSet, b: ByteSet) -> Bool {
        a.words == b.words
    }

    /// `\w`: letters, digits and `_`.
    static var word: ByteSet {
        var set = posixClass("alnum")!
        set.insert(UInt8(ascii: "_"))
        return set
    }

    /// A POSIX class of the C locale (`[:alpha:]` ...), or nil for an unknown name.
    static func posixClass(_ name: String) -> ByteSet? {
        let test: (UInt8) -> Bool
        switch name {
        case "alpha": test = { isLetter($0) }
        case "digit": test = { isDigit($0) }
        case "alnum": test = { isLetter($0) || isDigit($0) }
        case "upper": test = { $0 >= 65 && $0 <= 90 }
        case "lower": test = { $0 >= 97 && $0 <= 122 }
        case "space": test = { $0 == 32 || ($0 >= 9 && $0 <= 13) }
        case "blank": test = { $0 == 32 || $0 == 9 }
        case "punct": test = { $0 >= 33 && $0 <= 126 && !isLetter($0) && !isDigit($0) }
        case "print": test = { $0 >= 32 && $0 <= 126 }
        case "graph": test = { $0 >= 33 && $0 <= 126 }
        case "cntrl": test = { $0 < 32 || $0 == 127 }
        case "xdigit": test = { isDigit($0) || ($0 | 0x20 >= 97 && $0 | 0x20 <= 102) }
        default: return nil
        }
        var set = ByteSet()
        for byte in UInt8.min...UInt8.max where test(byte) { set.insert(byte) }
        return set
    }

    private static func isLetter(_ byte: UInt8) -> Bool { byte | 0x20 >= 97 && byte | 0x20 <= 122 }
    private static func isDigit(_ byte: UInt8) -> Bool { byte >= 48 && byte <= 57 }
}
