import Dispatch
import Glibc

/// An answer whose body is known before the attempt (a stub's answer): written to a
/// download's part file exactly as a transfer writes it (a 2xx starts the file over or
/// continues a 206 at the resume offset, the validator kept for If-Range, the digest on the
/// download's hashing queue; any other status leaves the file alone and keeps the start of
/// the body). Blocking file work: never call it on the engine thread.
public enum KnownBody {
    /// What was written, and the body the answer keeps (the start of a non-2xx body; nothing
    /// for a 2xx). A file that cannot be written fails as a transfer's would: kind `other`,
    /// `filePath` set.
    public static func write(_ body: [UInt8], status: Int, headers: ResponseHeaders, to target: DownloadTarget)
        -> Result<(download: DownloadOutcome, errorBody: [UInt8]), TransferError> {
        write(status: status, headers: headers, to: target) { consume in
            body.withUnsafeBytes { _ = consume($0) }
            return true
        }
    }

    /// The same for a body read from `fd` (a stored answer of the HTTP cache) in blocks of
    /// 512 KiB: never whole in memory. A read error fails as a file error would.
    public static func write(contentsOf fd: Int32, status: Int, headers: ResponseHeaders, to target: DownloadTarget)
        -> Result<(download: DownloadOutcome, errorBody: [UInt8]), TransferError> {
        var block = [UInt8](repeating: 0, count: 512 << 10)
        return write(status: status, headers: headers, to: target) { consume in
            while true {
                let n = block.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else { return n == 0 }
                let more = block.withUnsafeBytes { consume(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
                if !more { return true }
            }
        }
    }

    /// Feeds what `produce` hands to `consume` (which answers false once the sink takes no
    /// more) into the part file; `produce` answers false when it could not read its body.
    private static func write(status: Int, headers: ResponseHeaders, to target: DownloadTarget,
                              produce: (_ consume: (UnsafeRawBufferPointer) -> Bool) -> Bool)
        -> Result<(download: DownloadOutcome, errorBody: [UInt8]), TransferError> {
        HTTPEngine.assertNotOnAnEngineThread()
        let sink: DownloadSink
        do {
            sink = try DownloadSink(target: target)
        } catch {
            return .failure(TransferError(.other, error.detail, filePath: error.path))
        }
        var errorBody: [UInt8] = []
        let caughtUp = DispatchSemaphore(value: 0)
        let complete = produce { bytes in
            var offset = 0
            // In libcurl's pieces, so the sink gathers, writes and hashes them as it would.
            while offset < bytes.count {
                let end = min(bytes.count, offset + DownloadSink.largestPiece)
                switch sink.write(UnsafeRawBufferPointer(rebasing: bytes[offset..<end]), status: status, headers: headers,
                                  errorBody: &errorBody, resume: { caughtUp.signal() }) {
                case .all: offset = end
                case .pause: caughtUp.wait()  // the hashing queue is behind: this thread may wait
                case .stop: return false
                }
            }
            return true
        }
        let outcome = sink.finish(status: status, headers: headers)
        if let failure = sink.failure {
            let file: String? = if case .writing = failure { target.partPath } else { nil }
            return .failure(TransferError(.other, failure.detail, filePath: file))
        }
        guard complete else { return .failure(TransferError(.other, "the stored body could not be read")) }
        return .success((outcome, errorBody))
    }
}
