internal import CCurl
import Glibc

// A streamed body's side of a transfer (`ResponseDestination.stream`, `RequestBody.stream`):
// engine thread only, as the rest of Transfer.

extension Transfer {
    /// The current response's head is complete (or its body begins, or the transfer ended
    /// without one): the receiver decides whether the body is its.
    func decideStream() {
        guard let bodyReceiver, !streaming else { return }
        streamDecided = true
        var effective: UnsafeMutablePointer<CChar>? = nil
        var version = 0
        if let easy {
            fetchd_easy_getinfo_str(easy, CURLINFO_EFFECTIVE_URL, &effective)
            fetchd_easy_getinfo_long(easy, CURLINFO_HTTP_VERSION, &version)
        }
        let head = ResponseHead(status: currentStatus, headers: responseHeaders, httpVersion: Self.versionName(version),
                                url: effective.map { Self.text($0, reusing: request.url) } ?? request.url)
        streaming = bodyReceiver.begin(head)
    }

    /// A piece of the body for the receiver: what the write callback answers, or nil when the
    /// body is not the receiver's (it goes to memory).
    func stream(_ data: UnsafeMutablePointer<CChar>, _ length: Int, to receiver: any BodyReceiver) -> Int? {
        if !streamDecided { decideStream() }
        guard streaming else { return nil }
        switch receiver.receive(UnsafeRawBufferPointer(start: data, count: length), resume: resumeAfterPause) {
        case .all:
            streamedBytes += Int64(length)
            return length
        case .pause: return fetchd_writefunc_pause()
        case .stop: return 0  // CURLE_WRITE_ERROR; `streamFailure` says why
        }
    }

    /// At the end of a transfer with a response: the bytes the receiver took (nil: none, the
    /// body is in memory). A body-less answer's head is decided here.
    func streamedBody() -> Int64? {
        if !streamDecided { decideStream() }
        return streaming ? streamedBytes : nil
    }

    /// Why a streamed body stopped the transfer (its receiver or its source failed).
    var streamFailure: TransferError? {
        bodyReceiver?.failure ?? streamedUpload?.source.failure
    }
}

/// A `BodySource` as libcurl's read callback sees it: paused while nothing is ready, through
/// the send caps when the transfer has any. It can be rewound only while nothing was read.
final class StreamedUpload: UploadSource, @unchecked Sendable {
    let source: any BodySource
    private let throttle: TransferThrottle?
    /// Unpauses the transfer (set when the transfer begins on its engine thread).
    var resume: @Sendable () -> Void = {}

    init(_ source: any BodySource, throttle: TransferThrottle?) {
        self.source = source
        self.throttle = throttle.flatMap { $0.send.isEmpty ? nil : $0 }
    }

    func read(into buffer: UnsafeMutablePointer<CChar>?, _ capacity: Int) -> Int {
        guard let buffer else { return Int(fetchd_readfunc_abort()) }
        guard let throttle else { return read(buffer, capacity) }
        return throttle.read(capacity, remaining: Int64.max) { read(buffer, $0) }
    }

    private func read(_ buffer: UnsafeMutablePointer<CChar>, _ capacity: Int) -> Int {
        switch source.read(into: UnsafeMutableRawBufferPointer(start: buffer, count: capacity), resume: resume) {
        case .bytes(let n): return n
        case .pause: return Int(CURL_READFUNC_PAUSE)
        case .fail: return Int(fetchd_readfunc_abort())
        }
    }

    /// libcurl rewinds to send the body again (a redirect, a reused connection that died):
    /// only to the start, and only while nothing was read.
    func seek(to position: curl_off_t, origin: Int32) -> Int32 {
        origin == SEEK_SET && position == 0 && source.consumed == 0 ? fetchd_seekfunc_ok() : fetchd_seekfunc_fail()
    }
}
