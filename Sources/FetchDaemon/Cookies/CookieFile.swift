import FetchEngine
import FoundationEssentials
import Glibc

/// The `--cookie-file`: a Netscape cookies.txt, the format curl (`-b`/`-c`) and wget
/// (`--load-cookies`) read. It holds the "default" jar's persistent cookies; session cookies
/// are not written, as curl does not write them.
enum CookieFile {
    static let header = """
        # Netscape HTTP Cookie File
        # https://curl.se/docs/http-cookies.html
        # Written by fetchd: the persistent cookies of its "default" jar.


        """

    struct Contents: Equatable {
        var cookies: [Cookie] = []
        /// "line N: why", one per line that was skipped.
        var problems: [String] = []
    }

    /// Reads every cookie line; a malformed line is reported and skipped, never fatal.
    static func parse(_ text: String) -> Contents {
        var contents = Contents()
        for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            do {
                if let cookie = try Cookie.parse(netscapeLine: line) { contents.cookies.append(cookie) }
            } catch {
                contents.problems.append("line \(index + 1): \(error.description)")
            }
        }
        return contents
    }

    /// The file's text: persistent, unexpired cookies in a stable order.
    static func render(_ cookies: [Cookie], now: Int64) -> String {
        let kept = cookies.filter { $0.isPersistent && !$0.isExpired(now: now) }.sorted { a, b in
            (a.domain, a.path, a.name) < (b.domain, b.path, b.name)
        }
        return header + kept.map { $0.netscapeLine + "\n" }.joined()
    }

    struct IOError: Error, CustomStringConvertible {
        let description: String
    }

    /// The file's text, or nil when there is no file yet.
    static func read(_ path: String) throws(IOError) -> String? {
        guard let data = FileManager.default.contents(atPath: path) else {
            if access(path, F_OK) != 0 && errno == ENOENT { return nil }
            throw IOError(description: "cannot read \(path): \(String(cString: strerror(errno)))")
        }
        return String(decoding: data, as: UTF8.self)
    }

    /// Replaces the file atomically: a temporary file in the same directory, written and
    /// fsynced, renamed over the old one, then the directory fsynced. A crash leaves the old
    /// file or the new one, never half of one.
    static func write(_ text: String, to path: String) throws(IOError) {
        let directory = PathText.directory(of: path)
        let base = PathText.lastComponent(of: path)
        var template = Array("\(directory.isEmpty ? "." : directory)/.\(base).XXXXXX".utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard fd >= 0 else { throw failure("cannot create a temporary file next to \(path)") }
        let temporary = String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
        var ok = false
        defer {
            if !ok { unlink(temporary) }
        }
        // Cookies are credentials: owner only, whatever the umask.
        fchmod(fd, 0o600)
        let bytes = Array(text.utf8)
        var written = 0
        while written < bytes.count {
            let n = bytes[written...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else {
                let error = failure("cannot write \(temporary)")
                close(fd)
                throw error
            }
            written += n
        }
        guard fsync(fd) == 0 else {
            let error = failure("cannot fsync \(temporary)")
            close(fd)
            throw error
        }
        close(fd)
        guard rename(temporary, path) == 0 else { throw failure("cannot rename \(temporary) to \(path)") }
        ok = true
        let dir = open(directory.isEmpty ? "." : directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dir >= 0 {
            fsync(dir)
            close(dir)
        }
    }

    private static func failure(_ what: String) -> IOError {
        IOError(description: "\(what): \(String(cString: strerror(errno)))")
    }
}
