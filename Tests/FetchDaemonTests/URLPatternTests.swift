import Glibc
import XCTest

@testable import FetchDaemon

/// A stub's urlPattern: what addStub refuses, and the matcher against glibc's regexec on the
/// patterns both accept. No I/O, no clock: the bound is counted in steps.
final class URLPatternTests: XCTestCase {
    private func refusal(_ pattern: String) -> String? {
        do {
            _ = try URLPattern(pattern)
            return nil
        } catch {
            return error.reason
        }
    }

    func testBackReferencesAreRefusedWithTheReason() {
        let reason = refusal(#"(a*)*\1b"#)
        XCTAssertNotNil(reason)
        XCTAssertTrue(reason?.contains("back-references (\\1) are not allowed") ?? false, reason ?? "")
        XCTAssertNotNil(refusal(#"(x)\9"#))
    }

    func testWhatThisMatcherDoesNotSupportIsRefused() {
        for pattern in [#"\bword"#, #"a\>"#, "[[=a=]]", "[[.a.]]", "[[.-.]-z]"] {
            XCTAssertNotNil(refusal(pattern), pattern)
        }
    }

    func testSyntaxErrorsAreSaidInPOSIXWords() {
        XCTAssertEqual(refusal("(a"), #"not a POSIX extended regular expression: Unmatched ( or \("#)
        XCTAssertEqual(refusal("*a"), "not a POSIX extended regular expression: Invalid preceding regular expression")
        XCTAssertEqual(refusal("a{2,1}"), #"not a POSIX extended regular expression: Invalid content of \{\}"#)
        XCTAssertEqual(refusal("[b-a]"), "not a POSIX extended regular expression: Invalid range end")
        XCTAssertEqual(refusal("[[:nope:]]"), "not a POSIX extended regular expression: Invalid character class name")
    }

    func testPatternsThatCompileTooLargeAreRefusedBeforeRegcomp() {
        XCTAssertNil(refusal("a{999}"))
        XCTAssertTrue(refusal("a{1001}")?.contains("compiles to 1001 states, more than 1000") ?? false)
        // Counted, never built: a million copies.
        XCTAssertTrue(refusal("((a{100}){100}){100}")?.contains("compiles to 1000000 states") ?? false)
        XCTAssertTrue(refusal("(((a{100}){100}){100}){9999}")?.contains("compiles to over 1000000 states") ?? false)
    }

    func testNestedRepetitionIsAcceptedAndStaysLinear() throws {
        // What made glibc (and any backtracking matcher) take seconds is one pass here.
        let url = "http://h/" + String(repeating: "a", count: 16_384)
        for source in ["(a+)+b", "(a*)*b", "(a|aa)*b", "[a-z]+/items", "(.*a){20}b", "((a|b)*a(a|b){20}c)"] {
            let pattern = try URLPattern(source)
            var run = URLPattern.Run(pattern, url)
            var budget = Int.max
            XCTAssertEqual(run.resume(budget: &budget), false, source)
            let spent = Int.max - budget
            XCTAssertLessThanOrEqual(spent, run.worstSteps, source)
            XCTAssertLessThanOrEqual(spent, (url.utf8.count + 1) * (pattern.states + 1), source)
        }
    }

    func testARunInSlicesAnswersAsOneRun() throws {
        let pattern = try URLPattern("(a|b)*a(a|b){8}c$")
        let text = "http://h/" + String(repeating: "ab", count: 500) + "abbbbbbbbc"
        XCTAssertTrue(pattern.matches(text))
        var run = URLPattern.Run(pattern, text)
        var slices = 0
        var answer: Bool?
        while answer == nil {
            var budget = 50
            answer = run.resume(budget: &budget)
            slices += 1
        }
        XCTAssertEqual(answer, true)
        XCTAssertGreaterThan(slices, 10)
    }

    func testKnownAnswers() throws {
        let cases: [(String, String, Bool)] = [
            ("", "anything", true),
            ("^http://api\\.test/v[0-9]+/items(\\?|$)", "http://api.test/v12/items?page=2", true),
            ("^http://api\\.test/v[0-9]+/items(\\?|$)", "http://api.test/v12/itemsx", false),
            ("^https://", "http://h/", false),
            ("a^", "a", false),
            ("(^a|b$)", "xb", true),
            ("[]a]+x", "]]ax", true),
            ("[^/]+\\.json$", "http://h/a/b.json", true),
            ("[[:digit:]]{3}-[[:alpha:]]", "id=123-x", true),
            ("\\w+=\\S", "a_1=%", true),
            ("x{0}y", "y", true),
            ("a)", "a)", true),
            ("(|a)b", "b", true),
        ]
        for (source, text, expected) in cases {
            XCTAssertEqual(try URLPattern(source).matches(text), expected, "\(source) on \(text)")
        }
    }

    /// Random patterns from a small grammar, and random texts: wherever regcomp accepts a
    /// pattern, this matcher accepts it too and answers as regexec does. (Anchors stay out of
    /// groups: glibc forgets them in the copies a `{n}` makes, `(^|a){2}x` matching "bax".)
    func testAgreesWithGlibcOnRandomPatterns() throws {
        var random = SeededNumbers(state: 0x5EED)
        var compared = 0
        for _ in 0..<3_000 {
            let source = Self.pattern(&random, depth: 0)
            var regex = regex_t()
            guard regcomp(&regex, source, REG_EXTENDED | REG_NOSUB) == 0 else {
                XCTAssertNotNil(refusal(source), "glibc refuses \(source), this matcher accepts it")
                continue
            }
            defer { regfree(&regex) }
            let pattern: URLPattern
            do {
                pattern = try URLPattern(source)
            } catch {
                XCTFail("\(source): glibc accepts it, refused: \(error.reason)")
                continue
            }
            for _ in 0..<12 {
                let text = String((0..<random.below(14)).map { _ in Array("ab/.x-c")[random.below(7)] })
                let glibc = regexec(&regex, text, 0, nil, 0) == 0
                XCTAssertEqual(pattern.matches(text), glibc, "\(source) on \(text)")
                compared += 1
            }
        }
        XCTAssertGreaterThan(compared, 10_000)
    }

    private static func pattern(_ random: inout SeededNumbers, depth: Int) -> String {
        let branches = 1 + (random.below(4) == 0 ? random.below(3) : 0)
        return (0..<branches).map { _ in
            (0..<random.below(depth == 0 ? 5 : 3)).map { _ in piece(&random, depth: depth) }.joined()
        }.joined(separator: "|")
    }

    private static func piece(_ random: inout SeededNumbers, depth: Int) -> String {
        let atoms = ["a", "b", "c", "/", "\\.", ".", "x", "[ab]", "[^a]", "[a-c]", "[[:alpha:]]", "[]a]", "[-a]", "[a-]",
                     "\\w", "{", "*", ")"] + (depth == 0 ? ["^", "$"] : [])
        var atom = depth < 3 && random.below(5) == 0 ? "(" + pattern(&random, depth: depth + 1) + ")" : atoms[random.below(atoms.count)]
        let quantifiers = ["", "", "", "*", "+", "?", "{2}", "{0,2}", "{1,}", "{,2}", "{3,1}", "**"]
        atom += quantifiers[random.below(quantifiers.count)]
        return atom
    }
}

/// A small seeded generator (Knuth's MMIX LCG, high bits): the same patterns on every run.
struct SeededNumbers {
    var state: UInt64

    mutating func below(_ n: Int) -> Int {
        state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        return Int((state >> 33) % UInt64(n))
    }
}
