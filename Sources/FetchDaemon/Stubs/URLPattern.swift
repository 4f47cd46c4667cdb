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
