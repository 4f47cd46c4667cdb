internal import CCurl

/// Holds one transfer to its bandwidth caps, on the engine's own clock: libcurl's
/// CURLOPT_MAX_RECV_SPEED_LARGE holds only an average, and on a fast link let a whole small
/// body through at once (600 kB under a 200,000 B/s cap in 0.25 s). Here the write callback
/// pauses the transfer (CURL_WRITEFUNC_PAUSE) while a receive bucket has no room for the
/// piece, the read callbacks hand libcurl no more than a send bucket holds
/// (CURL_READFUNC_PAUSE when it holds nothing), and the engine thread's `ThrottleTimers`
/// unpause the transfer when the bucket will have room.
///
/// A transfer draws from each of its buckets: its request's own caps, and any bucket several
/// transfers share (a host's or the whole daemon's budget), whichever is the stricter.
/// Engine thread only (the callbacks and the loop run there); the buckets have their own locks.
final class TransferThrottle {
    let id: UInt64
    let receive: [BandwidthBucket]
    let send: [BandwidthBucket]
    /// The engine thread's timers, set when the transfer begins there.
    var timers: ThrottleTimers?
    private let thread = OneThread()

    init(id: UInt64, receive: [BandwidthBucket], send: [BandwidthBucket]) {
        self.id = id
        self.receive = receive
        self.send = send
    }

    /// The throttle for a request's own caps and the budgets it shares (its host's, the
    /// daemon's), or nil when it has none.
    convenience init?(id: UInt64, request: borrowing HTTPRequest) {
        guard let options = request.transportIfSet,
              options.maxRecvBytesPerSecond != nil || options.maxSendBytesPerSecond != nil || !options.receiveBudgets.isEmpty
        else { return nil }
        self.init(id: id, receive: (options.maxRecvBytesPerSecond.map { [BandwidthBucket(bytesPerSecond: $0)] } ?? []) + options.receiveBudgets,
                  send: options.maxSendBytesPerSecond.map { [BandwidthBucket(bytesPerSecond: $0)] } ?? [])
    }

    /// libcurl's receive buffer for a capped transfer: one burst at most (1 KiB to 16 KiB,
    /// libcurl's smallest and its default), so what it reads from the socket ahead of the
    /// caps stays that small; nil without a receive cap.
    var receiveBufferBytes: Int? {
        guard let smallest = receive.map(\.burst).min() else { return nil }
        return min(max(smallest, 1024), 16 << 10)
    }

    /// Whether a piece of `length` bytes may be received now (then call `received`); when
    /// not, the transfer is unpaused once every bucket has room for it.
    func mayReceive(_ length: Int) -> Bool {
        assert(thread.isOwner, "a transfer's throttle is its engine thread's")
        var wait: UInt64 = 0
        for bucket in receive { wait = max(wait, bucket.delay(for: length)) }
        guard wait > 0 else { return true }
        timers?.resume(id, after: wait)
        return false
    }

    func received(_ length: Int) {
        for bucket in receive { bucket.take(length) }
    }

    /// How many of `capacity` bytes may be read for sending now (then call `sent` with what
    /// was read); 0: pause the transfer, which is unpaused once there is room.
    func sendable(_ capacity: Int) -> Int {
        assert(thread.isOwner, "a transfer's throttle is its engine thread's")
        var wait: UInt64 = 0
        for bucket in send { wait = max(wait, bucket.delay(for: capacity)) }
        var allowed = capacity
        if wait == 0 {
            for bucket in send { allowed = min(allowed, bucket.available()) }
            // Another transfer took a shared bucket's room in between: try again soon.
            if allowed == 0 { wait = 1_000_000 }
        }
        guard wait == 0 else {
            timers?.resume(id, after: wait)
            return 0
        }
        return allowed
    }

    func sent(_ length: Int) {
        for bucket in send { bucket.take(length) }
    }

    /// A read callback's answer: at most `capacity` bytes of the `remaining` ones, read by
    /// `read` (which returns what it read, or a libcurl read code), as the send caps allow.
    func read(_ capacity: Int, remaining: Int64, _ read: (Int) -> Int) -> Int {
        let wanted = min(capacity, Int(clamping: remaining))
        guard wanted > 0 else { return 0 }  // the end of the body, never a pause
        let allowed = sendable(wanted)
        guard allowed > 0 else { return Int(CURL_READFUNC_PAUSE) }
        let n = read(allowed)
        if n > 0 && n <= allowed { sent(n) }
        return n
    }
}

/// When each throttled transfer of one engine thread is to be unpaused: the loop sleeps no
/// longer than until the first of them (`millisecondsUntilNext`) and unpauses those that are
/// due (`takeDue`). Engine thread only.
final class ThrottleTimers {
    /// Transfer id -> when to unpause it (monotonic nanoseconds).
    private var due: [UInt64: UInt64] = [:]
    private let clock: () -> UInt64
    private let thread = OneThread()

    init(clock: @escaping () -> UInt64 = BandwidthBucket.monotonicNanoseconds) {
        self.clock = clock
    }

    var isEmpty: Bool { due.isEmpty }

    /// Unpause transfer `id` in `nanoseconds` (or sooner, when it was due sooner already).
    func resume(_ id: UInt64, after nanoseconds: UInt64) {
        assert(thread.isOwner, "throttle timers are one engine thread's")
        let at = clock() &+ nanoseconds
        if let earlier = due[id], earlier <= at { return }
        due[id] = at
    }

    /// The transfer ended: nothing to unpause.
    func remove(_ id: UInt64) {
        if !due.isEmpty { due[id] = nil }
    }

    /// The transfers due now, no longer listed (one that pauses again is listed again).
    func takeDue() -> [UInt64] {
        assert(thread.isOwner, "throttle timers are one engine thread's")
        guard !due.isEmpty else { return [] }
        let now = clock()
        let ready = due.filter { $0.value <= now }.map(\.key)
        for id in ready { due[id] = nil }
        return ready
    }

    /// Milliseconds until the first transfer is due, rounded up (the loop's wait is in
    /// milliseconds: rounded down it would wake too early and spin); nil when none waits.
    func millisecondsUntilNext() -> Int32? {
        guard let first = due.values.min() else { return nil }
        let now = clock()
        guard first > now else { return 0 }
        return Int32(clamping: (first - now + 999_999) / 1_000_000)
    }
}
