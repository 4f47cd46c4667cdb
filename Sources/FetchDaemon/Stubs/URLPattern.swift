import Glibc

/// A stub's `urlPattern`: a POSIX extended regular expression (regcomp), searched for
/// anywhere in the URL as sent (anchor it with ^ and $). Compiled once, at addStub;
/// regexec on a compiled pattern is safe from several threads.
final class URLPattern: @unchecked Sendable {
    let source: String
    private let regex: UnsafeMutablePointer<regex_t>

    struct Invalid: Error {
        let reason: String
    }

    init(_ source: String) throws(Invalid) {
        // Compiled before `self` is whole: a throw then runs no deinit (which would free it twice).
        let compiled = UnsafeMutablePointer<regex_t>.allocate(capacity: 1)
        let code = regcomp(compiled, source, REG_EXTENDED | REG_NOSUB)
        guard code == 0 else {
            var text = [CChar](repeating: 0, count: 256)
            regerror(code, compiled, &text, text.count)
            compiled.deallocate()
            throw Invalid(reason: String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        self.source = source
        regex = compiled
    }

    deinit {
        regfree(regex)
        regex.deallocate()
    }

    func matches(_ text: String) -> Bool {
        regexec(regex, text, 0, nil, 0) == 0
    }
}
