/// One HTTP request as the engine performs it: everything already resolved to bytes and
/// numbers. Building it from a client's parameters is the daemon's job.
public struct HTTPRequest: Sendable {
    public var method: String
    public var url: String
    public var headers: [HTTPHeader]
    public var body: RequestBody
    /// Whole attempt, milliseconds.
    public var timeoutMs: Int
    public var connectTimeoutMs: Int
    /// 0 = do not follow redirects.
    public var maxRedirects: Int
    /// Past this many body bytes the transfer fails with `bodyTooLarge` (in-memory bodies).
    public var maxBodyBytes: Int
    /// In memory (the default), or streamed to a file.
    public var destination: ResponseDestination = .memory
    /// Keep each hop's request and response headers (for HTTP logs); costs a little.
    public var recordsExchange = false
    /// The cookie jar this request reads and updates; nil: no cookies at all.
    public var cookieJar: String? = nil
    /// Shared by one client's requests: bounds the bodies they hold in memory (and the
    /// answers waiting for that client) by pausing transfers; nil: no bound.
    public var bodyBudget: BodyBudget? = nil
    /// Headers libcurl would send itself (Accept, User-Agent...) that this request leaves out.
    public var removedHeaders: [String] = []
    /// libcurl's parse of `url`, when the daemon has it: used only while `url` is still the
    /// text it was parsed from (a stage that changes the URL needs not clear it).
    public var parsedURL: ParsedURL? = nil

    /// The transport options (TLS, proxies, bandwidth caps, a range, where to connect,
    /// signing), which most requests leave at their defaults: kept behind one reference, nil
    /// when all are defaults, so a request copies and frees one field for them, not thirteen,
    /// and the structs that hold a request stay small.
    public var transport: TransportOptions {
        get { transportBox.value ?? TransportOptions() }
        set { transportBox = Rare(newValue == TransportOptions() ? nil : newValue) }
    }
    /// The options when any differs from its default (the transfer sets only those).
    public var transportIfSet: TransportOptions? { transportBox.value }
    private var transportBox = Rare<TransportOptions>(nil)

    /// Sign the request with AWS Signature Version 4 (libcurl's CURLOPT_AWS_SIGV4); nil: no.
    public var awsSigV4: AWSSigV4? { get { transportBox.value?.awsSigV4 } set { transport.awsSigV4 = newValue } }
    /// Do not verify the server's certificate (curl -k).
    public var insecure: Bool { get { transportBox.value?.insecure ?? false } set { transport.insecure = newValue } }
    /// A PEM bundle to verify the server with, in place of the engine's.
    public var caFile: String? { get { transportBox.value?.caFile } set { transport.caFile = newValue } }
    /// A client certificate and its key (PEM) for mutual TLS; the key may be in the certificate's file.
    public var certFile: String? { get { transportBox.value?.certFile } set { transport.certFile = newValue } }
    public var keyFile: String? { get { transportBox.value?.keyFile } set { transport.keyFile = newValue } }
    /// Bandwidth caps in bytes per second (libcurl's CURLOPT_MAX_RECV/SEND_SPEED_LARGE); nil: none.
    public var maxRecvBytesPerSecond: Int? {
        get { transportBox.value?.maxRecvBytesPerSecond } set { transport.maxRecvBytesPerSecond = newValue }
    }
    public var maxSendBytesPerSecond: Int? {
        get { transportBox.value?.maxSendBytesPerSecond } set { transport.maxSendBytesPerSecond = newValue }
    }
    /// Bandwidth budgets the response body draws from besides its own cap, shared with other
    /// transfers (its host's, the whole daemon's).
    public var receiveBudgets: [BandwidthBucket] {
        get { transportBox.value?.receiveBudgets ?? [] } set { transport.receiveBudgets = newValue }
    }
    /// nil: libcurl's default (the http_proxy, https_proxy, no_proxy environment); "": no
    /// proxy at all; else the proxy's URL (http, https, socks5, socks5h; credentials allowed).
    public var proxy: String? { get { transportBox.value?.proxy } set { transport.proxy = newValue } }
    /// As curl's --noproxy: hosts reached without the proxy.
    public var noProxy: String? { get { transportBox.value?.noProxy } set { transport.noProxy = newValue } }
    /// nil: HTTP/2 over TLS when the server offers it, else 1.1.
    public var httpVersion: HTTPVersionChoice? { get { transportBox.value?.httpVersion } set { transport.httpVersion = newValue } }
    /// A byte range, "START-END" or "START-" (libcurl's CURLOPT_RANGE).
    public var range: String? { get { transportBox.value?.range } set { transport.range = newValue } }
    /// "HOST:PORT:ADDRESS:PORT" entries: connect there for that host and port (CURLOPT_CONNECT_TO:
    /// per request, unlike CURLOPT_RESOLVE, which would change the multi's shared DNS cache).
    public var connectTo: [String] { get { transportBox.value?.connectTo ?? [] } set { transport.connectTo = newValue } }
    /// HTTP over this Unix socket (CURLOPT_UNIX_SOCKET_PATH); the URL still names the host.
    public var unixSocket: String? { get { transportBox.value?.unixSocket } set { transport.unixSocket = newValue } }

    public init(
        method: String = "GET", url: String, headers: [HTTPHeader] = [], body: RequestBody = .none,
        timeoutMs: Int = 60_000, connectTimeoutMs: Int = 10_000, maxRedirects: Int = 10,
        maxBodyBytes: Int = 64 << 20
    ) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.timeoutMs = timeoutMs
        self.connectTimeoutMs = connectTimeoutMs
        self.maxRedirects = maxRedirects
        self.maxBodyBytes = maxBodyBytes
    }

    /// Whether the transfer opens files the client named (a body file, a multipart file
    /// part, a download's part file, TLS files): those are opened on the starting thread,
    /// which must then not be the engine thread.
    public var usesLocalFiles: Bool {
        if case .file = destination { return true }
        if let transport = transportIfSet, transport.caFile != nil || transport.certFile != nil || transport.keyFile != nil { return true }
        switch body {
        case .file, .fileRange: return true
        case .multipart(let form): return !form.filePaths.isEmpty
        case .none, .bytes, .stream: return false
        }
    }

    /// The first value of a header, matched without regard to case.
    public func header(named name: String) -> String? {
        headers.first(where: { $0.name.caseInsensitiveEquals(name) })?.value
    }

    /// Whether the request gives a header of this name, or removes it.
    func namesHeader(_ name: String) -> Bool {
        header(named: name) != nil || removedHeaders.contains(where: { $0.caseInsensitiveEquals(name) })
    }
}

/// A request's transport options (`HTTPRequest.transport`), each at its default here.
public struct TransportOptions: Sendable, Equatable {
    public var awsSigV4: AWSSigV4? = nil
    public var insecure = false
    public var caFile: String? = nil
    public var certFile: String? = nil
    public var keyFile: String? = nil
    public var maxRecvBytesPerSecond: Int? = nil
    public var maxSendBytesPerSecond: Int? = nil
    public var receiveBudgets: [BandwidthBucket] = []
    public var proxy: String? = nil
    public var noProxy: String? = nil
    public var httpVersion: HTTPVersionChoice? = nil
    public var range: String? = nil
    public var connectTo: [String] = []
    public var unixSocket: String? = nil

    public init() {}
}

/// What libcurl needs to sign a request with AWS Signature Version 4. libcurl signs every hop
/// to the request's own host, and no hop to another one.
public struct AWSSigV4: Sendable, Equatable {
    /// As curl's `--aws-sigv4`: `"aws:amz:REGION:SERVICE"`.
    public var provider: String
    public var accessKeyID: String
    public var secretAccessKey: String

    public init(provider: String, accessKeyID: String, secretAccessKey: String) {
        self.provider = provider
        self.accessKeyID = accessKeyID
        self.secretAccessKey = secretAccessKey
    }
}

public enum HTTPVersionChoice: String, Sendable, Equatable {
    case http1_1 = "1.1"
    case http2 = "2"
}

public struct HTTPHeader: Sendable, Equatable {
    public var name: String
    public var value: String
    public init(_ name: String, _ value: String) {
        self.name = name
        self.value = value
    }
}

public enum RequestBody: Sendable, Equatable {
    case none
    case bytes([UInt8])
    /// Streamed from disk on each attempt.
    case file(path: String)
    /// `length` bytes of a file from `offset` (a chunk of a resumable upload).
    case fileRange(path: String, offset: Int64, length: Int64)
    /// multipart/form-data, streamed.
    case multipart(MultipartForm)
    /// Read as it comes (a client's descriptor): sent with Content-Length when its length is
    /// known, else chunked (HTTP/1.1) or as an HTTP/2 stream.
    case stream(StreamedBody)
}

public enum ResponseDestination: Sendable {
    case memory
    case file(DownloadTarget)
    /// Handed to a receiver as it arrives (`BodyReceiver`); a body it does not take stays in memory.
    case stream(any BodyReceiver)
}

extension String {
    /// ASCII case-insensitive equality, without allocating (header names are ASCII).
    public func caseInsensitiveEquals(_ other: String) -> Bool {
        guard utf8.count == other.utf8.count else { return false }
        for (a, b) in zip(utf8, other.utf8) where a != b {
            guard a | 0x20 == b | 0x20, (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(a | 0x20) else { return false }
        }
        return true
    }
}

extension Array where Element == HTTPHeader {
    /// The last value of a header, matched without regard to case.
    public func last(named name: String) -> String? {
        last { $0.name.caseInsensitiveEquals(name) }?.value
    }
}
