/// What one finished transfer produced.
public struct HTTPResponse: Sendable {
    public var status: Int
    /// The final response's headers, in the order received, names as the server sent them.
    public var headers: ResponseHeaders
    /// The URL after redirects.
    public var url: String
    public var body: [UInt8]
    public var redirects: Int
    public var httpVersion: String
    public var timings: TransferTimings
    public var sentBytes: Int64
    public var receivedBytes: Int64
    /// For a download: what was written.
    public var download: DownloadOutcome?
    /// The body's bytes a `BodyReceiver` took (`ResponseDestination.stream`), when it took
    /// this response's body: `body` is then empty. nil: the body is in `body`.
    public var streamedBytes: Int64?
    /// Each hop's headers, when the request asked to record them.
    public var exchange: [ExchangeHop] = []
    /// The address of the server (or proxy) the last hop was made with; nil for no connection.
    public var remoteAddress: String?

    public init(
        status: Int, headers: ResponseHeaders, url: String, body: [UInt8], redirects: Int,
        httpVersion: String, timings: TransferTimings, sentBytes: Int64, receivedBytes: Int64
    ) {
        self.status = status
        self.headers = headers
        self.url = url
        self.body = body
        self.redirects = redirects
        self.httpVersion = httpVersion
        self.timings = timings
        self.sentBytes = sentBytes
        self.receivedBytes = receivedBytes
    }
}

/// libcurl's phase times for one transfer, in microseconds from its start.
public struct TransferTimings: Sendable, Equatable {
    public var nameLookup: Int64 = 0
    public var connect: Int64 = 0
    public var tlsHandshake: Int64 = 0
    public var preTransfer: Int64 = 0
    public var startTransfer: Int64 = 0
    public var redirect: Int64 = 0
    public var total: Int64 = 0
    public init() {}
}

/// Bytes moved so far, reported while a transfer runs.
public struct TransferProgress: Sendable, Equatable {
    public var sentBytes: Int64
    public var totalSendBytes: Int64?
    public var receivedBytes: Int64
    public var totalReceiveBytes: Int64?

    public init(sentBytes: Int64, totalSendBytes: Int64?, receivedBytes: Int64, totalReceiveBytes: Int64?) {
        self.sentBytes = sentBytes
        self.totalSendBytes = totalSendBytes
        self.receivedBytes = receivedBytes
        self.totalReceiveBytes = totalReceiveBytes
    }
}
