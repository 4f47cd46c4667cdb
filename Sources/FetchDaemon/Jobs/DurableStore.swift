import FetchEngine
import FoundationEssentials
import Glibc
import JSONRPC

/// Durable jobs on disk: one file per job, `<state-dir>/jobs/<jobId>.json`, holding the
/// method and its params (without credentials) and the restarts so far. Written with
/// `LocalFile.replace` (a temporary file, fsync, rename, the directory fsynced) before the
/// job's first byte is sent, rewritten when the job is resumed, removed when it ends. What a
/// download has received lives in its part file and its validator in the part file's
/// extended attribute (PartFileStage), so nothing is written per block.
///
/// The directory is made (0700, checked as the socket's is) when the first durable job
/// comes, so a daemon that never gets one never touches the disk.
final class DurableStore: Sendable {
    /// One job as written down.
    struct Record: Sendable {
        let jobID: String
        /// "download" or "upload".
        let method: String
        let params: JSONValue
        let restarts: Int
        /// A resumable upload's session, once the server gave one.
        var sessionURL: String? = nil
    }

    /// Headers never written to the state directory (their auth rule applies again).
    static let secretHeaders: Set<String> = ["authorization", "cookie", "proxy-authorization"]

    let directory: String
    private let log: Logger
    private let prepared = Locked(false)

    init(directory: String, log: Logger) {
        self.directory = directory
        self.log = log
    }

    var jobsDirectory: String { directory + "/jobs" }

    /// The params as stored: the client's, its credential headers removed.
    static func storable(_ params: JSONValue?, jobID: String) -> JSONValue {
        var object = params?.objectValue ?? JSONObject()
        object["jobId"] = .string(jobID)
        if case .object(var headers)? = object["headers"] {
            for (name, _) in headers.members where secretHeaders.contains(name.lowercased()) { headers[name] = nil }
            object["headers"] = .object(headers)
        }
        return .object(object)
    }

    /// A file name for the job: its id when that is a plain name, else its digest.
    static func fileName(for jobID: String) -> String {
        let plain = jobID.utf8.allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                || byte == 0x2D || byte == 0x5F || byte == 0x2E
        }
        if plain && !jobID.hasPrefix(".") && jobID.utf8.count <= 200 { return jobID + ".json" }
        var digest = SHA256()
        digest.update(Array(jobID.utf8))
        return "sha256-" + digest.finishHex() + ".json"
    }

    /// Writes the job down, durably (fsync), before it starts.
    func save(_ record: Record) throws {
        do {
            try prepare()
        } catch {
            throw TransferFileError(path: directory, detail: error.description)
        }
        let value: JSONValue = [
            "version": 1, "jobId": .string(record.jobID), "method": .string(record.method),
            "restarts": JSONValue(record.restarts), "params": record.params,
            "sessionUrl": JSONValue(record.sessionURL),
        ]
        try LocalFile.replace(Self.fileName(for: record.jobID), in: jobsDirectory, with: JSONCodec.encode(value))
    }

    /// The job has ended: nothing is left to resume.
    func remove(jobID: String) {
        let path = jobsDirectory + "/" + Self.fileName(for: jobID)
        if unlink(path) == 0 {
            LocalFile.syncDirectory(jobsDirectory)
        } else if errno != ENOENT {
            log.warning("durable job \(jobID): cannot remove \(path): \(String(cString: strerror(errno)))")
        }
    }

    /// Every job left by the daemon before, oldest first. A file that cannot be read is
    /// logged and moved aside (`<name>.corrupt`), never fatal.
    func unfinished() -> [Record] {
        guard let dir = opendir(jobsDirectory) else { return [] }
        defer { closedir(dir) }
        do { try prepare() } catch {
            log.error("durable jobs not resumed: \(error)")
            return []
        }
        var found: [(time: Int, Record)] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
            guard name.hasSuffix(".json"), !name.hasPrefix(".") else { continue }
            let path = jobsDirectory + "/" + name
            var info = stat()
            guard lstat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { continue }
            if let record = read(path) {
                found.append((info.st_mtim.tv_sec, record))
            } else {
                let aside = path + ".corrupt"
                rename(path, aside)
                log.error("durable job file \(path) is not a job (truncated or corrupt): moved to \(aside), skipped")
            }
        }
        return found.sorted { $0.time < $1.time }.map(\.1)
    }

    private func read(_ path: String) -> Record? {
        guard let bytes = try? LocalFile.contents(of: path), let value = try? JSONCodec.decode(bytes),
              value["version"] == 1,
              let jobID = value["jobId"]?.stringValue, let method = value["method"]?.stringValue,
              method == "download" || method == "upload",
              case .object(let params)? = value["params"], params["jobId"]?.stringValue == jobID,
              case .integer(let restarts)? = value["restarts"], restarts >= 0
        else { return nil }
        return Record(jobID: jobID, method: method, params: .object(params), restarts: Int(restarts),
                      sessionURL: value["sessionUrl"]?.stringValue)
    }

    private func prepare() throws(StartupError) {
        try prepared.withLock { (done: inout Bool) throws(StartupError) in
            guard !done else { return }
            Self.makeParents(of: directory)
            let fix = "remove it, or choose another directory with --state-dir"
            try SocketPath.preparePrivateDirectory(directory, uid: getuid(), what: "state directory", fix: fix)
            try SocketPath.preparePrivateDirectory(jobsDirectory, uid: getuid(), what: "durable jobs directory", fix: fix)
            done = true
        }
    }

    /// mkdir -p of the directories above `path` (0700: ~/.local/state as XDG asks).
    private static func makeParents(of path: String) {
        var prefix = ""
        for part in PathText.directory(of: path).split(separator: "/") {
            prefix += "/" + part
            mkdir(prefix, 0o700)
        }
    }
}

/// `download` and `upload`: a job that may be durable, started from a request's params or,
/// after a restart, from what was written down.
protocol DurableJobMethod: RPCMethod {
    var driver: JobDriver { get }
    /// `resuming`: what a daemon before wrote down (nil: a client's request).
    func spec(_ params: JSONValue?, resuming: DurableStore.Record?) throws -> JobSpec
}

extension DurableJobMethod {
    func call(_ params: JSONValue?, context: RPCContext) async throws -> JSONValue {
        try await driver.run(try spec(params, resuming: nil), context: context)
    }

    /// A durable job left by the daemon before: started again with its jobId (a download
    /// continues its part file, an upload starts over).
    func resume(_ record: DurableStore.Record) throws {
        try driver.start(try spec(record.params, resuming: record), context: .resumed) { _ in }
    }
}

extension RPCContext {
    /// A durable job resumed at start has no connection: its answer goes to `attach` and
    /// `getJob` (connection ids start at 1).
    static let resumed = RPCContext(connectionID: 0, notify: { _, _ in })
}
