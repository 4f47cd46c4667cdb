internal import CCurl
import Dispatch
import FoundationEssentials
import Glibc

// libcurl's C callbacks. Each receives the Transfer as its user data pointer and runs on
// the engine thread.

private func transfer(_ pointer: UnsafeMutableRawPointer?) -> Transfer {
    Unmanaged<Transfer>.fromOpaque(pointer!).takeUnretainedValue()
}

/// The Transfer lent to `body` without a retain and a release: the engine holds it while
/// libcurl calls back. For the callbacks called many times per transfer (about 10 header
/// and 14 progress calls per small GET, each a retain and a release before).
@inline(__always)
private func withTransfer<R>(_ pointer: UnsafeMutableRawPointer?, _ body: (Transfer) -> R) -> R {
    Unmanaged<Transfer>.fromOpaque(pointer!)._withUnsafeGuaranteedRef(body)
}

let transferWriteCallback: fetchd_data_cb = { data, size, count, user in
    let t = transfer(user)
    let length = size * count
    guard let data, length > 0 else { return 0 }
    guard let throttle = t.throttle else { return receive(data, length, t) }
    // Over a bandwidth cap: paused until its bucket has room (TransferThrottle); the piece
    // counts against the caps once it is taken.
    guard throttle.mayReceive(length) else { return fetchd_writefunc_pause() }
    let taken = receive(data, length, t)
    if taken == length { throttle.received(length) }
    return taken
}

/// A piece of the response body: taken (its length), held back (CURL_WRITEFUNC_PAUSE) or
/// refused (0, which stops the transfer).
@inline(__always)
private func receive(_ data: UnsafeMutablePointer<CChar>, _ length: Int, _ t: Transfer) -> Int {
    // This turn's share used up: the rest waits for the next turn of the loop (FairTurns).
    if let turns = t.turns, !turns.mayTake(length, turnSeen: &t.turnSeen, turnBytes: &t.turnBytes, id: t.id) {
        return fetchd_writefunc_pause()
    }
    if let receiver = t.bodyReceiver, let taken = t.stream(data, length, to: receiver) { return taken }
    if let sink = t.downloadSink {
        let bytes = UnsafeRawBufferPointer(start: data, count: length)
        switch sink.write(bytes, status: t.currentStatus, headers: t.responseHeaders, errorBody: &t.body,
                          resume: t.resumeAfterPause) {
        case .all: return length
        case .stop: return 0
        case .pause: return fetchd_writefunc_pause()
        }
    }
    if t.body.count + length > t.request.maxBodyBytes {
        t.bodyTooLarge = true
        return 0  // makes libcurl stop with CURLE_WRITE_ERROR
    }
    // The client holds too much already: libcurl keeps the piece until it is unpaused.
    if let budget = t.request.bodyBudget {
        guard budget.take(length, for: t.id, holding: t.budgetHeld, resume: t.resumeAfterPause) else {
            return fetchd_writefunc_pause()
        }
        t.budgetHeld += length
    }
    t.body.append(contentsOf: UnsafeRawBufferPointer(start: data, count: length))
    return length
}

let transferHeaderCallback: fetchd_data_cb = { data, size, count, user in
    withTransfer(user) { t -> Int in
        let length = size * count
        guard let data else { return length }
        t.responseHeaderBytes += length
        if t.responseHeaderBytes > HTTPLimits.responseHeaderBytes {
            t.responseHeadersTooLarge = true
            return 0  // makes libcurl stop with CURLE_WRITE_ERROR, before its own limit does
        }
        // Parsed as bytes, with contiguous-buffer fast paths: this runs for every header of
        // every response.
        let bytes = UnsafeBufferPointer(start: UnsafeRawPointer(data).assumingMemoryBound(to: UInt8.self), count: length)
        var end = length
        while end > 0, bytes[end - 1] == UInt8(ascii: "\n") || bytes[end - 1] == UInt8(ascii: "\r") { end -= 1 }
        if end >= 5, bytes[0] == UInt8(ascii: "H"), bytes[1] == UInt8(ascii: "T"), bytes[2] == UInt8(ascii: "T"),
           bytes[3] == UInt8(ascii: "P"), bytes[4] == UInt8(ascii: "/") {
            // A new response begins (a redirect hop or an interim 1xx): keep only the last.
            t.responseHeaders.removeAll(keepingCapacity: true)
            t.readingHeaders = true
            if !t.streaming { t.streamDecided = false }
            t.recorder?.statusReceived(String(decoding: UnsafeBufferPointer(rebasing: bytes[0..<end]), as: UTF8.self))
        } else if end > 0, let found = memchr(bytes.baseAddress!, Int32(UInt8(ascii: ":")), end) {
            let colon = UnsafeRawPointer(found) - UnsafeRawPointer(bytes.baseAddress!)
            var start = colon + 1
            while start < end, bytes[start] == UInt8(ascii: " ") || bytes[start] == UInt8(ascii: "\t") { start += 1 }
            var stop = end
            while stop > start, bytes[stop - 1] == UInt8(ascii: " ") || bytes[stop - 1] == UInt8(ascii: "\t") { stop -= 1 }
            t.responseHeaders.append(name: UnsafeBufferPointer(rebasing: bytes[0..<colon]),
                                     value: UnsafeBufferPointer(rebasing: bytes[start..<stop]))
            if let recorder = t.recorder { recorder.headerReceived(t.responseHeaders[t.responseHeaders.count - 1]) }
        } else if end == 0 {
            t.readingHeaders = false
            // A head is complete: a streamed body's receiver decides whether the body is its.
            if t.bodyReceiver != nil && !t.streamDecided { t.decideStream() }
        }
        return length
    }
}

let transferReadCallback: fetchd_data_cb = { buffer, size, count, user in
    guard let body = transfer(user).bodySource else { return Int(fetchd_readfunc_abort()) }
    return body.read(into: buffer, size * count)
}

let transferSeekCallback: fetchd_seek_cb = { user, offset, origin in
    guard let body = transfer(user).bodySource else { return fetchd_seekfunc_fail() }
    return body.seek(to: offset, origin: origin)
}

/// Reports progress at most every `progressIntervalNanos`; the final report is sent by the
/// engine when the transfer ends.
let transferProgressCallback: fetchd_xferinfo_cb = { user, receiveTotal, received, sendTotal, sent in
    withTransfer(user) { t -> Int32 in
        // The closure is loaded (and retained) only to be called, not on every call.
        guard t.onProgress != nil else { return 0 }
        // libcurl calls this many times per transfer, mostly with nothing new: the counts it
        // passes are compared with what was last reported before the clock is read.
        if let last = t.lastProgress, last.receivedBytes == received, last.sentBytes == sent,
           (last.totalReceiveBytes ?? 0) == receiveTotal, (last.totalSendBytes ?? 0) == sendTotal {
            return 0
        }
        let now = DispatchTime.now().uptimeNanoseconds
        guard now &- t.lastProgressNanos >= progressIntervalNanos else { return 0 }
        let progress = t.currentProgress()
        guard progress != t.lastProgress else { return 0 }
        t.lastProgressNanos = now
        t.lastProgress = progress
        t.onProgress?(progress)
        return 0
    }
}

/// Progress reports are at most this frequent per transfer (protocol: 100 ms).
let progressIntervalNanos: UInt64 = 100_000_000
