import FetchEngine
import FoundationEssentials
import Glibc
import JSONRPC

/// Which local files requests may read or write: absolute paths only, and with
/// `--allow-dir`, only under those directories (symbolic links resolved first).
///
/// Resolving a path (realpath) is file system work, which never runs on an engine thread:
/// a method that decodes its params there (`fetch`, `setAuth`) decodes them with the
/// `--allow-dir` check left out (`decodeCheckingPaths`) and runs it on the blocking threads
/// before anything else happens.
struct FilePolicy: Sendable {
    let allowedDirectories: [String]
    /// Where a policy that leaves the `--allow-dir` check to later puts the paths to check.
    private let deferred: DeferredPaths?

    init(allowedDirectories: [String]) {
        self.allowedDirectories = allowedDirectories
        deferred = nil
    }

    private init(allowedDirectories: [String], deferringTo deferred: DeferredPaths) {
        self.allowedDirectories = allowedDirectories
        self.deferred = deferred
    }

    /// Whether checking a path needs the file system (`--allow-dir` is set).
    var resolvesPaths: Bool { !allowedDirectories.isEmpty }

    /// Downloads are held to the same rule as uploads.
    func checkWritable(_ path: String, field: String) throws {
        try checkReadable(path, field: field)
    }

    func checkReadable(_ path: String, field: String) throws {
        try Self.checkPath(path, field: field)
        guard resolvesPaths else { return }
        if let deferred { return deferred.add(path) }
        try checkAllowed(path)
    }

    /// The `--allow-dir` check: the path, links resolved, is one of the allowed directories
    /// or under one.
    private func checkAllowed(_ path: String) throws {
        let resolved = Self.resolve(path)
        let allowed = allowedDirectories.map(Self.resolve).contains { dir in
            resolved == dir || resolved.hasPrefix(dir.hasSuffix("/") ? dir : dir + "/")
        }
        guard allowed else {
            throw NotAllowed(detail: "\(path) is outside the allowed directories (--allow-dir)")
        }
    }

    /// Decodes params (`decode`, given the policy to check their paths with) and hands what
    /// they make to `then`. Without `--allow-dir`, or when they name no file, all of it runs
    /// here and now, and a mistake is thrown. Otherwise the paths are checked on `blocking`
    /// (realpath) and `then` runs there; a mistake found on the way goes to `failed`, and it
    /// is the one decoding would have thrown first: a refused path named before a field's
    /// mistake wins over it, as when the paths are checked in order.
    func decodeCheckingPaths<Value: Sendable>(
        on blocking: WorkerThreads, _ decode: (FilePolicy) throws -> Value,
        then: @escaping @Sendable (Value) throws -> Void, failed: @escaping @Sendable (any Error) -> Void
    ) throws {
        guard resolvesPaths else { return try then(decode(self)) }
        let paths = DeferredPaths()
        let decoded = Result { try decode(FilePolicy(allowedDirectories: allowedDirectories, deferringTo: paths)) }
        let named = paths.taken
        guard !named.isEmpty else { return try then(decoded.get()) }
        blocking.execute { [self] in
            do {
                for path in named { try checkAllowed(path) }
                try then(decoded.get())
            } catch {
                failed(error)
            }
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
        HTTPEngine.assertNotOnAnEngineThread()
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

    /// The paths a decoding named, in order, for the check that runs after it.
    private final class DeferredPaths: Sendable {
        private let paths = Locked<[String]>([])

        func add(_ path: String) {
            paths.withLock { $0.append(path) }
        }

        var taken: [String] { paths.withLock { $0 } }
    }
}

/// A request the daemon's policy refuses (-32004).
struct NotAllowed: Error {
    let detail: String
}
