import FetchEngine
import Dispatch
import FoundationEssentials
import Glibc
import JSONRPC
import Synchronization

/// HTTP logging, switchable while running for every client: when enabled, each finished
/// job is written as one HAR 1.2 file, atomically, on a queue of its own (never on the
/// engine thread, never delaying an answer).
final class HTTPLog: Sendable {
    struct Settings: Sendable, Equatable {
        var enabled = false
        var directory: String
        var bodies = true
        var maxBodyBytes = 1 << 20
        var redact = true
    }

    private let settings: Locked<Settings>
    private let queue = DispatchQueue(label: "fetchd.http-log")
    private let log: Logger

    init(defaultDirectory: String, log: Logger) {
        settings = Locked(Settings(directory: defaultDirectory))
        self.log = log
    }

    var current: Settings { settings.withLock { $0 } }
    var isEnabled: Bool { settings.withLock { $0.enabled } }

    /// Applies new settings; the directory is created (mode 0700) before logging starts.
    func apply(_ new: Settings) throws {
        if new.enabled { try Self.makeDirectory(new.directory) }
        settings.withLock { $0 = new }
        log.info("HTTP logging \(new.enabled ? "on, to \(new.directory)" : "off")")
    }

    /// Writes the job's HAR file when logging is on.
    func jobFinished(_ job: Job, outcome: HARBuilder.JobOutcome) {
        let settings = current
        guard settings.enabled else { return }
        let records = job.attemptRecords
        let finishedAt = Date()
        let log = self.log
        queue.async {
            let har = HARBuilder(settings: settings).har(job: job.info, records: records, outcome: outcome)
            let name = Self.fileName(finishedAt: finishedAt, jobID: job.id)
            do {
                try Self.writeAtomically(JSONCodec.encode(har), to: settings.directory + "/" + name)
            } catch {
                log.error("HTTP log: \(error)")
            }
        }
    }

    /// Waits until every log queued so far is written (tests and shutdown).
    func flush() {
        queue.sync {}
    }

    static func fileName(finishedAt: Date, jobID: String) -> String {
        let safeID = String(jobID.map { $0.isLetter || $0.isNumber || "._-".contains($0) ? $0 : "_" }.prefix(120))
        return "\(utcStamp(finishedAt))-\(safeID).har"
    }

    /// yyyyMMdd-HHmmss.SSS in UTC.
    static func utcStamp(_ date: Date) -> String {
        let since1970 = date.timeIntervalSince1970
        var seconds = time_t(since1970.rounded(.down))
        let millis = min(999, Int((since1970 - Double(seconds)) * 1000))
        var fields = tm()
        gmtime_r(&seconds, &fields)
        var text = [CChar](repeating: 0, count: 32)
        strftime(&text, text.count, "%Y%m%d-%H%M%S", &fields)
        let stamp = String(decoding: text.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return stamp + "." + String(String(millis + 1000).dropFirst())
    }

    static func makeDirectory(_ path: String) throws {
        // mkdir -p, each new level 0700, with errno's own words when it fails.
        var built = ""
        for component in path.split(separator: "/") {
            built += "/" + component
            if mkdir(built, 0o700) != 0 && errno != EEXIST {
                throw TransferFileError(path: path, detail: "cannot create the log directory \(built): \(String(cString: strerror(errno)))")
            }
        }
        var info = stat()
        guard stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR else {
            throw TransferFileError(path: path, detail: "not a directory")
        }
    }

    /// A temporary file with an unpredictable name, fsync, rename: a reader never sees half
    /// a file, and a link planted in the directory is never written through.
    static func writeAtomically(_ bytes: [UInt8], to path: String) throws {
        try LocalFile.replace(PathText.lastComponent(of: path), in: PathText.directory(of: path), with: bytes)
    }
}
