internal import CCurl
import FoundationEssentials
import Glibc

/// One transfer's state while the engine runs it: an easy handle configured from an
/// `HTTPRequest`, the response as it arrives, and the completion to call exactly once.
///
/// Created on the caller's thread, then touched only by the engine thread: that hand-over
/// through the engine's locked command queue is why it may be `@unchecked Sendable`.
final class Transfer: @unchecked Sendable {
    typealias Completion = @Sendable (Result<HTTPResponse, TransferError>) -> Void

    let id: UInt64
    let request: HTTPRequest
    let completion: Completion
    let onProgress: (@Sendable (TransferProgress) -> Void)?

    var easy: UnsafeMutableRawPointer?
    private(set) var headerList: UnsafeMutablePointer<curl_slist>?
    private var connectToList: UnsafeMutablePointer<curl_slist>?
    let errorBuffer: UnsafeMutablePointer<CChar>

    var responseHeaders = ResponseHeaders()
    /// Header bytes over every hop so far, as libcurl counts them (`HTTPLimits`).
    var responseHeaderBytes = 0
    var responseHeadersTooLarge = false
    /// A status line arrived and the blank line that ends its headers has not.
    var readingHeaders = false
    var body: [UInt8] = []
    var bodyTooLarge = false
    /// Body bytes counted in the request's `bodyBudget`.
    var budgetHeld = 0
    /// The request body file, opened by the caller so that an unreadable file fails early.
    var uploadFile: UploadFile?
    /// The files of a multipart body's file parts, opened by the caller (read through
    /// curl_mime_data_cb; they outlive `mime`).
    let mimeFiles: [UploadFile]
    /// A download's file writer, opened by the caller.
    let downloadSink: DownloadSink?
    /// A streamed body's receiver (`ResponseDestination.stream`), and what it was given
    /// (Transfer+Stream).
    let bodyReceiver: (any BodyReceiver)?
    /// The receiver took the current response's body (decided at its head, once).
    var streaming = false
    /// The receiver has heard the current response's head.
    var streamDecided = false
    var streamedBytes: Int64 = 0
    /// A request body read as it comes (`RequestBody.stream`).
    let streamedUpload: StreamedUpload?
    /// The request's TLS files, read by the caller: libcurl gets their bytes, never their names.
    let tlsFiles: TLSFiles?
    /// The bandwidth caps (`TransferThrottle`); nil for a transfer without any.
    let throttle: TransferThrottle?
    /// An in-memory body read through the send caps (an uncapped one is handed to libcurl whole).
    private var uploadBytes: UploadBytes?
    /// A capped multipart body's in-memory parts, read through the send caps (they outlive `mime`).
    private var mimeBytes: [UploadBytes] = []
    private var mime: OpaquePointer?
    /// Hops for HTTP logs, when the request records them.
    let recorder: ExchangeRecorder?
    /// Unpauses the transfer on the engine thread (a download paused while its hash caught up).
    var resumeAfterPause: @Sendable () -> Void = {} {
        didSet { streamedUpload?.resume = resumeAfterPause }
    }
    /// The engine's turns (`FairTurns`), and this transfer's body bytes in the current one.
    var turns: FairTurns?
    var turnSeen: UInt64 = 0
    var turnBytes = 0
    var lastProgressNanos: UInt64 = 0
    var lastProgress: TransferProgress?
    private var finished = false

    init(id: UInt64, request: consuming HTTPRequest, uploadFile: UploadFile?, mimeFiles: [UploadFile] = [],
         downloadSink: DownloadSink? = nil, tlsFiles: TLSFiles? = nil,
         onProgress: (@Sendable (TransferProgress) -> Void)?, completion: @escaping Completion) {
        self.id = id
        let throttle = TransferThrottle(id: id, request: request)
        self.throttle = throttle
        self.request = request
        uploadFile?.throttle = throttle
        for file in mimeFiles { file.throttle = throttle }
        self.uploadFile = uploadFile
        self.mimeFiles = mimeFiles
        self.downloadSink = downloadSink
        bodyReceiver = if case .stream(let receiver) = request.destination { receiver } else { nil }
        streamedUpload = if case .stream(let body) = request.body { StreamedUpload(body.source, throttle: throttle) } else { nil }
        self.tlsFiles = tlsFiles
        recorder = request.recordsExchange ? ExchangeRecorder() : nil
        self.onProgress = onProgress
        self.completion = completion
        errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE))
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE))
    }

    deinit {
        if let headerList { curl_slist_free_all(headerList) }
        if let connectToList { curl_slist_free_all(connectToList) }
        if let mime { curl_mime_free(mime) }
        errorBuffer.deallocate()
    }

    /// Calls the completion once; later calls (a cancel racing the end) do nothing.
    func finish(_ result: Result<HTTPResponse, TransferError>) {
        guard !finished else { return }
        finished = true
        uploadFile?.close()
        completion(result)
    }

    var errorText: String { String(cString: errorBuffer) }

    // MARK: configuring the easy handle

    /// Sets the handle's options for this transfer. `configured`: the handle comes from the
    /// pool with the baseline options still set (its last transfer was a plain one, see
    /// `leavesBaselineOnly`), so only what each transfer has of its own is set.
    func configure(_ easy: UnsafeMutableRawPointer, settings: EngineSettings, defaults: DefaultHeaders, configured: Bool) {
        self.easy = easy
        let me = Unmanaged.passUnretained(self).toOpaque()
        // Room for a typical response's headers at once, not grown one doubling at a time.
        responseHeaders.reserveCapacity(headers: 16, bytes: 512)
        if !configured { Self.setBaseline(easy, settings: settings) }
        if let parsed = request.parsedURL, parsed.text == request.url {
            // Parsed once already, when the request was read: libcurl reads that parse. On a
            // reused handle the last transfer's URL text goes first: libcurl 7.88 takes the
            // effective URL from the parse only while it has no text.
            if configured { fetchd_easy_setopt_str(easy, CURLOPT_URL, nil) }
            fetchd_easy_setopt_ptr(easy, CURLOPT_CURLU, UnsafeMutableRawPointer(parsed.handle))
        } else {
            // libcurl prefers a CURLU to the URL text: a reused handle's last one goes.
            if configured { fetchd_easy_setopt_ptr(easy, CURLOPT_CURLU, nil) }
            fetchd_easy_setopt_str(easy, CURLOPT_URL, request.url)
        }
        fetchd_easy_setopt_ptr(easy, CURLOPT_ERRORBUFFER, errorBuffer)
        fetchd_easy_setopt_ptr(easy, CURLOPT_PRIVATE, me)
        setLong(CURLOPT_TIMEOUT_MS, request.timeoutMs)
        setLong(CURLOPT_CONNECTTIMEOUT_MS, request.connectTimeoutMs)
        setLong(CURLOPT_FOLLOWLOCATION, request.maxRedirects > 0 ? 1 : 0)
        setLong(CURLOPT_MAXREDIRS, request.maxRedirects)
        // Most requests have no transport option of their own: the baseline's stand.
        if let options = request.transportIfSet { configureTransport(easy, options, settings: settings) }
        if let bodyReceiver {
            // A CONNECT's answer is the proxy's, not a head of the response.
            setLong(CURLOPT_SUPPRESS_CONNECT_HEADERS, 1)
            if bodyReceiver.runsOnBulkThread { setLong(CURLOPT_BUFFERSIZE, settings.receiveBufferBytes) }
        }
        if case .file = request.destination {
            // A large receive buffer only pays off for bodies streamed to disk; for small
            // answers its allocation would cost more than the transfer.
            setLong(CURLOPT_BUFFERSIZE, settings.receiveBufferBytes)
        }
        // Capped: libcurl reads at most a burst from the socket ahead of the caps.
        if let buffer = throttle?.receiveBufferBytes { setLong(CURLOPT_BUFFERSIZE, buffer) }

        fetchd_easy_setopt_ptr(easy, CURLOPT_WRITEDATA, me)
        fetchd_easy_setopt_ptr(easy, CURLOPT_HEADERDATA, me)
        // Set either way: a reused handle may come from a transfer with the other.
        setLong(CURLOPT_NOPROGRESS, onProgress == nil ? 1 : 0)
        if onProgress != nil {
            fetchd_easy_setopt_xferinfo_cb(easy, transferProgressCallback)
            fetchd_easy_setopt_ptr(easy, CURLOPT_XFERINFODATA, me)
        }

        if recorder != nil {
            setLong(CURLOPT_VERBOSE, 1)
            fetchd_easy_setopt_debug_cb(easy, transferDebugCallback)
            fetchd_easy_setopt_ptr(easy, CURLOPT_DEBUGDATA, me)
        }

        configureMethodAndBody(easy, me: me)
        configureHeaders(easy, defaults: defaults)
    }

    /// The options every transfer of this engine has alike, set on a fresh or reset handle.
    /// A handle whose transfer set nothing else keeps them for the next (EngineLoop's pool):
    /// `curl_easy_reset` and setting these again cost about 8k instructions per request, the
    /// protocol lists parsed and the encodings listed each time (callgrind).
    private static func setBaseline(_ easy: UnsafeMutableRawPointer, settings: EngineSettings) {
        fetchd_easy_setopt_long(easy, CURLOPT_NOSIGNAL, 1)
        fetchd_easy_setopt_str(easy, CURLOPT_PROTOCOLS_STR, "http,https")
        fetchd_easy_setopt_str(easy, CURLOPT_REDIR_PROTOCOLS_STR, "http,https")
        fetchd_easy_setopt_long(easy, CURLOPT_HTTP_VERSION, Int(fetchd_http_version_2tls()))
        // Decodes every encoding libcurl can; the header itself is one of `defaults`' lines.
        fetchd_easy_setopt_str(easy, CURLOPT_ACCEPT_ENCODING, "")
        // A proxy from the environment: its CONNECT gets the agent from here (see configure).
        if settings.proxyFromEnvironment { fetchd_easy_setopt_str(easy, CURLOPT_USERAGENT, settings.userAgent) }
        if let caFile = settings.caFile { fetchd_easy_setopt_str(easy, CURLOPT_CAINFO, caFile) }
        if !settings.proxyFromEnvironment {
            // "" is libcurl's "no proxy, and no look at the environment" (EngineSettings).
            fetchd_easy_setopt_str(easy, CURLOPT_PROXY, "")
            fetchd_easy_setopt_str(easy, CURLOPT_NOPROXY, "")
        }
        fetchd_easy_setopt_data_cb(easy, CURLOPT_WRITEFUNCTION, transferWriteCallback)
        fetchd_easy_setopt_data_cb(easy, CURLOPT_HEADERFUNCTION, transferHeaderCallback)
    }

    /// Whether this transfer set no option beyond the baseline's and the ones every transfer
    /// sets again (URL, timeouts, redirects, the private and data pointers, progress or not,
    /// HTTPGET, the header list, the cookie share): a GET into memory with none of the
    /// request's own transport options and no exchange recorded. Its handle then goes back to
    /// the pool as it is, when the transfer also succeeded on a reused connection (see
    /// EngineLoop.end).
    var leavesBaselineOnly: Bool {
        guard request.method == "GET", case .none = request.body, case .memory = request.destination,
              recorder == nil else { return false }
        return request.transportIfSet == nil
    }

    /// The request's own transport options. TLS verification, a range, where to connect:
    /// libcurl keys its reused connections on these (verification, CA, Unix socket,
    /// connect-to), so requests with different ones never share a connection.
    private func configureTransport(_ easy: UnsafeMutableRawPointer, _ options: TransportOptions, settings: EngineSettings) {
        switch options.httpVersion {
        case nil: break  // the baseline's: HTTP/2 over TLS when offered
        case .http1_1?:
            setLong(CURLOPT_HTTP_VERSION, Int(fetchd_http_version_1_1()))
            // libcurl would hand this TLS connection, made with ALPN http/1.1 only, to a later
            // request of the same host that wants HTTP/2: closed after this transfer instead.
            if request.url.utf8.prefix(6).map({ $0 | 0x20 }) == Array("https:".utf8) { setLong(CURLOPT_FORBID_REUSE, 1) }
        case .http2?: setLong(CURLOPT_HTTP_VERSION, Int(fetchd_http_version_2()))
        }
        // A proxy's CONNECT carries no custom header lines: it gets the agent from here.
        if options.proxy != nil && !settings.proxyFromEnvironment {
            fetchd_easy_setopt_str(easy, CURLOPT_USERAGENT, settings.userAgent)
        }
        // caFile, certFile and keyFile: read by the caller (TLSFiles), set as bytes.
        tlsFiles?.apply(to: easy)
        if options.insecure {
            setLong(CURLOPT_SSL_VERIFYPEER, 0)
            setLong(CURLOPT_SSL_VERIFYHOST, 0)
        }
        // maxRecvBytesPerSecond and maxSendBytesPerSecond: held by `throttle`, not by
        // libcurl's caps, which hold only an average.
        // "No proxy" is the baseline's (EngineSettings).
        if let proxy = options.proxy { fetchd_easy_setopt_str(easy, CURLOPT_PROXY, proxy) }
        if let noProxy = options.noProxy { fetchd_easy_setopt_str(easy, CURLOPT_NOPROXY, noProxy) }
        if let range = options.range { fetchd_easy_setopt_str(easy, CURLOPT_RANGE, range) }
        if let path = options.unixSocket { fetchd_easy_setopt_str(easy, CURLOPT_UNIX_SOCKET_PATH, path) }
        if !options.connectTo.isEmpty {
            var list: UnsafeMutablePointer<curl_slist>? = nil
            for entry in options.connectTo { list = curl_slist_append(list, entry) }
            connectToList = list
            fetchd_easy_setopt_slist(easy, CURLOPT_CONNECT_TO, list)
        }
        if let signing = options.awsSigV4 {
            // The handle copies the strings. CURLOPT_UNRESTRICTED_AUTH stays off: a redirect
            // to another host is not signed.
            fetchd_easy_setopt_str(easy, CURLOPT_AWS_SIGV4, signing.provider)
            fetchd_easy_setopt_str(easy, CURLOPT_USERNAME, signing.accessKeyID)
            fetchd_easy_setopt_str(easy, CURLOPT_PASSWORD, signing.secretAccessKey)
        }
    }

    private func configureMethodAndBody(_ easy: UnsafeMutableRawPointer, me: UnsafeMutableRawPointer) {
        let method = request.method
        switch request.body {
        case .none:
            switch method {
            case "GET": setLong(CURLOPT_HTTPGET, 1)
            case "HEAD": setLong(CURLOPT_NOBODY, 1)
            default: fetchd_easy_setopt_str(easy, CURLOPT_CUSTOMREQUEST, method)
            }
        case .bytes(let bytes):
            setLong(CURLOPT_POST, 1)
            fetchd_easy_setopt_off(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(bytes.count))
            if let throttle, !throttle.send.isEmpty {
                // Capped: read out through the caps, as a file is.
                uploadBytes = UploadBytes(bytes, throttle: throttle)
                setReadCallbacks(easy, me: me)
            } else {
                bytes.withUnsafeBytes { buffer in
                    // COPYPOSTFIELDS copies, so the handle never points into Swift memory.
                    _ = fetchd_easy_setopt_ptr(easy, CURLOPT_COPYPOSTFIELDS, UnsafeMutableRawPointer(mutating: buffer.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!))
                }
            }
            if method != "POST" { fetchd_easy_setopt_str(easy, CURLOPT_CUSTOMREQUEST, method) }
        case .multipart(let form):
            setLong(CURLOPT_UPLOAD_BUFFERSIZE, Self.uploadBufferBytes)
            mime = form.makeMime(for: easy, files: mimeFiles, throttle: throttle?.send.isEmpty == false ? throttle : nil,
                                 keeping: &mimeBytes)
            fetchd_easy_setopt_ptr(easy, CURLOPT_MIMEPOST, UnsafeMutableRawPointer(mime))
            if method != "POST" { fetchd_easy_setopt_str(easy, CURLOPT_CUSTOMREQUEST, method) }
        case .stream(let body):
            setLong(CURLOPT_UPLOAD_BUFFERSIZE, Self.uploadBufferBytes)
            setLong(CURLOPT_POST, 1)
            // Unknown (-1): chunked on HTTP/1.1.
            fetchd_easy_setopt_off(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(body.source.length ?? -1))
            setReadCallbacks(easy, me: me)
            if method != "POST" { fetchd_easy_setopt_str(easy, CURLOPT_CUSTOMREQUEST, method) }
        case .file, .fileRange:
            setLong(CURLOPT_UPLOAD_BUFFERSIZE, Self.uploadBufferBytes)
            setLong(CURLOPT_POST, 1)
            fetchd_easy_setopt_off(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(uploadFile?.length ?? 0))
            setReadCallbacks(easy, me: me)
            if method != "POST" { fetchd_easy_setopt_str(easy, CURLOPT_CUSTOMREQUEST, method) }
        }
    }

    /// The body is read (and rewound) through this transfer's callbacks.
    private func setReadCallbacks(_ easy: UnsafeMutableRawPointer, me: UnsafeMutableRawPointer) {
        fetchd_easy_setopt_data_cb(easy, CURLOPT_READFUNCTION, transferReadCallback)
        fetchd_easy_setopt_ptr(easy, CURLOPT_READDATA, me)
        fetchd_easy_setopt_seek_cb(easy, transferSeekCallback)
        fetchd_easy_setopt_ptr(easy, CURLOPT_SEEKDATA, me)
    }

    /// The body's reader, for the read and seek callbacks.
    var bodySource: (any UploadSource)? { uploadFile ?? uploadBytes ?? streamedUpload }

    /// Bodies read from files go out in blocks this large (libcurl's default is 64 KiB):
    /// fewer reads and sends per byte.
    static let uploadBufferBytes = 512 << 10

    private func configureHeaders(_ easy: UnsafeMutableRawPointer, defaults: DefaultHeaders) {
        // A body never waits a second for "100 Continue" from servers that don't send it.
        let suppressExpect = request.body != .none && request.header(named: "Expect") == nil
        if request.headers.isEmpty && request.removedHeaders.isEmpty && !suppressExpect {
            // Most requests: fetchd's own headers, in the list built once per engine thread.
            fetchd_easy_setopt_slist(easy, CURLOPT_HTTPHEADER, defaults.list)
            return
        }
        var list: UnsafeMutablePointer<curl_slist>? = nil
        for (name, line) in defaults.lines where !request.namesHeader(name) {
            list = curl_slist_append(list, line)
        }
        for header in request.headers {
            // "Name;" is libcurl's way to send a header with an empty value.
            let line = header.value.isEmpty ? "\(header.name);" : "\(header.name): \(header.value)"
            list = curl_slist_append(list, line)
        }
        // "Name:" is libcurl's way to leave out a header it would add itself.
        for name in request.removedHeaders { list = curl_slist_append(list, "\(name):") }
        if suppressExpect { list = curl_slist_append(list, "Expect:") }
        headerList = list
        fetchd_easy_setopt_slist(easy, CURLOPT_HTTPHEADER, list)
    }

    private func setLong(_ option: CURLoption, _ value: Int) {
        if let easy { fetchd_easy_setopt_long(easy, option, value) }
    }

    // MARK: reading the outcome

    func response() -> HTTPResponse {
        guard let easy else {
            return HTTPResponse(status: 0, headers: [], url: request.url, body: [], redirects: 0,
                                httpVersion: "", timings: TransferTimings(), sentBytes: 0, receivedBytes: 0)
        }
        var status = 0
        fetchd_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
        var redirects = 0
        fetchd_easy_getinfo_long(easy, CURLINFO_REDIRECT_COUNT, &redirects)
        var effective: UnsafeMutablePointer<CChar>? = nil
        fetchd_easy_getinfo_str(easy, CURLINFO_EFFECTIVE_URL, &effective)
        var version = 0
        fetchd_easy_getinfo_long(easy, CURLINFO_HTTP_VERSION, &version)
        var response = HTTPResponse(
            status: status, headers: responseHeaders,
            url: effective.map { Self.text($0, reusing: request.url) } ?? request.url,
            body: body, redirects: redirects, httpVersion: Self.versionName(version),
            timings: timings(), sentBytes: offInfo(CURLINFO_SIZE_UPLOAD_T),
            receivedBytes: offInfo(CURLINFO_SIZE_DOWNLOAD_T))
        // Over a Unix socket libcurl gives the socket's path, cut short: there is no address.
        var address: UnsafeMutablePointer<CChar>? = nil
        if request.unixSocket == nil, fetchd_easy_getinfo_str(easy, CURLINFO_PRIMARY_IP, &address) == CURLE_OK,
           let address, address.pointee != 0 {
            response.remoteAddress = String(cString: address)
        }
        response.download = downloadSink?.finish(status: status, headers: responseHeaders)
        if bodyReceiver != nil { response.streamedBytes = streamedBody() }
        response.exchange = recorder?.hops ?? []
        return response
    }

    /// The status of the response being received (for the body writer's first call).
    var currentStatus: Int {
        var status = 0
        if let easy { fetchd_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status) }
        return status
    }

    func currentProgress() -> TransferProgress {
        let sendTotal = offInfo(CURLINFO_CONTENT_LENGTH_UPLOAD_T)
        let receiveTotal = offInfo(CURLINFO_CONTENT_LENGTH_DOWNLOAD_T)
        return TransferProgress(
            sentBytes: offInfo(CURLINFO_SIZE_UPLOAD_T), totalSendBytes: sendTotal >= 0 ? sendTotal : nil,
            receivedBytes: offInfo(CURLINFO_SIZE_DOWNLOAD_T), totalReceiveBytes: receiveTotal >= 0 ? receiveTotal : nil)
    }

    func timings() -> TransferTimings {
        var t = TransferTimings()
        t.nameLookup = offInfo(CURLINFO_NAMELOOKUP_TIME_T)
        t.connect = offInfo(CURLINFO_CONNECT_TIME_T)
        t.tlsHandshake = offInfo(CURLINFO_APPCONNECT_TIME_T)
        t.preTransfer = offInfo(CURLINFO_PRETRANSFER_TIME_T)
        t.startTransfer = offInfo(CURLINFO_STARTTRANSFER_TIME_T)
        t.redirect = offInfo(CURLINFO_REDIRECT_TIME_T)
        t.total = offInfo(CURLINFO_TOTAL_TIME_T)
        return t
    }

    private func offInfo(_ info: CURLINFO) -> Int64 {
        guard let easy else { return 0 }
        var value: curl_off_t = 0
        guard fetchd_easy_getinfo_off(easy, info, &value) == CURLE_OK else { return -1 }
        return Int64(value)
    }

    /// The C string as a String, or `known` itself when they are the same text (the
    /// effective URL of a request that was not redirected): no new string to allocate.
    static func text(_ c: UnsafePointer<CChar>, reusing known: String) -> String {
        var known = known
        let same = known.withUTF8 { utf8 in
            strlen(c) == utf8.count && (utf8.isEmpty || memcmp(c, utf8.baseAddress!, utf8.count) == 0)
        }
        return same ? known : String(cString: c)
    }

    static func versionName(_ version: Int) -> String {
        switch version {
        case CURL_HTTP_VERSION_1_0: "HTTP/1.0"
        case CURL_HTTP_VERSION_1_1: "HTTP/1.1"
        case CURL_HTTP_VERSION_2_0: "HTTP/2"
        case CURL_HTTP_VERSION_3: "HTTP/3"
        default: ""
        }
    }
}

/// A request body file (or a range of one), opened before the transfer is queued.
final class UploadFile: UploadSource, @unchecked Sendable {
    let descriptor: Int32
    let size: Int64
    /// Where the body starts in the file, and how long it is.
    let offset: Int64
    let length: Int64
    /// Bytes of the body not read yet.
    var remaining: Int64
    /// The transfer's send caps, when it has any.
    var throttle: TransferThrottle?

    convenience init?(for body: RequestBody) throws(TransferFileError) {
        switch body {
        case .file(let path): try self.init(path: path, offset: 0, length: nil)
        case .fileRange(let path, let offset, let length): try self.init(path: path, offset: offset, length: length)
        default: return nil
        }
    }

    init(path: String, offset: Int64, length: Int64?) throws(TransferFileError) {
        let fd = try LocalFile.openForReading(path)
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            Glibc.close(fd)
            throw TransferFileError(path: path, detail: String(cString: strerror(errno)))
        }
        descriptor = fd
        size = Int64(info.st_size)
        self.offset = offset
        self.length = length ?? max(0, size - offset)
        remaining = self.length
        guard offset + self.length <= size, lseek(fd, off_t(offset), SEEK_SET) >= 0 else {
            Glibc.close(fd)
            throw TransferFileError(path: path, detail: "the range \(offset)+\(self.length) is past the end of the file (\(size) bytes)")
        }
    }

    /// libcurl's read callback: up to `capacity` bytes of the body (engine thread), as the
    /// send caps allow.
    func read(into buffer: UnsafeMutablePointer<CChar>?, _ capacity: Int) -> Int {
        guard let buffer else { return Int(fetchd_readfunc_abort()) }
        guard let throttle else { return read(buffer, capacity) }
        return throttle.read(capacity, remaining: remaining) { read(buffer, $0) }
    }

    private func read(_ buffer: UnsafeMutablePointer<CChar>, _ capacity: Int) -> Int {
        let wanted = min(capacity, Int(clamping: remaining))
        guard wanted > 0 else { return 0 }
        let n = Glibc.read(descriptor, buffer, wanted)
        guard n >= 0 else { return Int(fetchd_readfunc_abort()) }
        remaining -= Int64(n)
        return n
    }

    /// libcurl rewinds to resend the body (a redirect or an auth round): offsets are
    /// relative to where the body starts in the file.
    func seek(to position: curl_off_t, origin: Int32) -> Int32 {
        guard origin == SEEK_SET, position >= 0, Int64(position) <= length,
              lseek(descriptor, off_t(offset + Int64(position)), SEEK_SET) >= 0 else {
            return fetchd_seekfunc_fail()
        }
        remaining = length - Int64(position)
        return fetchd_seekfunc_ok()
    }

    private var closed = false
    func close() {
        guard !closed else { return }
        closed = true
        Glibc.close(descriptor)
    }

    deinit { close() }
}

/// A local file the request needs could not be used (-32003 to clients).
public struct TransferFileError: Error, Sendable, Equatable {
    public let path: String
    public let detail: String

    public init(path: String, detail: String) {
        self.path = path
        self.detail = detail
    }
}
