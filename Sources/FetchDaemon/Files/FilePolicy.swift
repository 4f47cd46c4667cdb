import FoundationEssentials
import Glibc
import JSONRPC

/// Which local files requests may read or write: absolute paths only, and with
/// `--allow-dir`, only under those directories (symbolic links resolved first).
struct FilePolicy: Sendable {
    let allowedDirectories: [String]

    /// Downloads are held to the same rule as uploads.
    func checkWritable(_ path: String, field: String) throws {
        try checkReadable(path, field: field)
    }

    func checkReadable(_ path: String, field: String) throws {
        try Self.checkPath(path, field: field)
        guard !allowedDirectories.isEmpty else { return }
        let resolved = Self.resolve(path)
        let allowed = allowedDirectories.map(Self.resolve).contains { dir in
            resolved == dir || resolved.hasPrefix(dir.hasSuffix("/") ? dir : dir + "/")
        }
        guard allowed else {
            throw NotAllowed(detail: "\(path) is outside the allowed directories (--allow-dir)")
        }
    }

    /// What every path a client names must be (a download's, a body file's, an upload's
    /// files, the HTTP log directory): absolute, and without a NUL, which would end it where
    /// the C library reads it ("f\u{0}.x" would be "f"), after any check made on the whole.
    static func checkPath(_ path: String, field: String) throws(RPCError) {
        guard path.hasPrefix("/") else {
            throw RPCError.invalidParams(field: field, "must be an absolute path")
        }
        guard !path.containsNUL else {
            throw RPCError.invalidParams(field: field, "a path may not contain NUL")
        }
    }

    private static func resolve(_ path: String) -> String {
        guard let real = realpath(path, nil) else {
            // A file that does not exist yet: resolve its directory.
            let directory = PathText.directory(of: path)
            guard directory != path, let realDirectory = realpath(directory, nil) else { return path }
            defer { free(realDirectory) }
            return String(cString: realDirectory) + "/" + PathText.lastComponent(of: path)
        }
        defer { free(real) }
        return String(cString: real)
    }
}

/// A request the daemon's policy refuses (-32004).
struct NotAllowed: Error {
    let detail: String
}
