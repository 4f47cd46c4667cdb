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

    /// The largest cookie file read (a jar of many thousand cookies is a few MiB).
    static let maxBytes = 16 << 20

    /// The file's text, or nil when there is no file yet.
    static func read(_ path: String) throws(IOError) -> String? {
        // LocalFile: a FIFO under the name must not hold the daemon's start, nor a huge file
        // its memory.
        do {
            return try LocalFile.contents(of: path, limit: maxBytes).map { String(decoding: $0, as: UTF8.self) }
        } catch {
            throw IOError(description: "cannot read \(path): \(error.detail)")
        }
    }

    /// Replaces the file atomically (LocalFile.replace): a crash leaves the old file or the
    /// new one, never half of one. Cookies are credentials: owner only, whatever the umask.
    static func write(_ text: String, to path: String) throws(IOError) {
        let directory = PathText.directory(of: path)
        do {
            try LocalFile.replace(PathText.lastComponent(of: path), in: directory.isEmpty ? "." : directory,
                                  with: Array(text.utf8), mode: 0o600)
        } catch {
            throw IOError(description: "cannot write \(path): \(error.detail)")
        }
    }
}
