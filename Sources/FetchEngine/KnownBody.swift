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
    public static func write(_ body: [UInt8], status: Int, headers: [HTTPHeader], to target: DownloadTarget)
        -> Result<(download: DownloadOutcome, errorBody: [UInt8]), TransferError> {
        let sink: DownloadSink
        do {
            sink = try DownloadSink(target: target)
        } catch {
            return .failure(TransferError(.other, error.detail, filePath: error.path))
        }
        var errorBody: [UInt8] = []
        var offset = 0
        let caughtUp = DispatchSemaphore(value: 0)
        // In libcurl's pieces, so the sink gathers, writes and hashes them as it would.
        while offset < body.count {
            let end = min(body.count, offset + DownloadSink.largestPiece)
            let taken = body.withUnsafeBytes { bytes in
                sink.write(UnsafeRawBufferPointer(rebasing: bytes[offset..<end]), status: status, headers: headers,
                           errorBody: &errorBody, resume: { caughtUp.signal() })
            }
            switch taken {
            case .all: offset = end
            case .pause: caughtUp.wait()  // the hashing queue is behind: this thread may wait
            case .stop: offset = body.count
            }
        }
        let outcome = sink.finish(status: status, headers: headers)
        if let failure = sink.failure {
            let file: String? = if case .writing = failure { target.partPath } else { nil }
            return .failure(TransferError(.other, failure.detail, filePath: file))
        }
        return .success((outcome, errorBody))
    }
}
