/// The head of a response, as a `BodyReceiver` hears of it before the body.
public struct ResponseHead: Sendable {
    public let status: Int
    public let headers: ResponseHeaders
    /// "HTTP/1.1", "HTTP/2", ...
    public let httpVersion: String
    /// The URL after the redirects libcurl followed.
    public let url: String

    public init(status: Int, headers: ResponseHeaders, httpVersion: String, url: String) {
        self.status = status
        self.headers = headers
        self.httpVersion = httpVersion
        self.url = url
    }
}

/// What a `BodyReceiver` did with a piece of the body.
public enum BodyTake: Sendable, Equatable {
    /// Taken: the transfer goes on.
    case all
    /// Nothing taken: libcurl keeps the piece and the transfer is paused
    /// (CURL_WRITEFUNC_PAUSE) until the `resume` given with it is called (from any thread).
    case pause
    /// The transfer must stop; `BodyReceiver.failure` says why.
    case stop
}

/// Takes a response's body as it arrives, in place of memory (`ResponseDestination.stream`):
/// the daemon's deliveries to a client's descriptor or as notifications. The engine calls it
/// on the transfer's engine thread, never waits for it, and pauses the transfer while it
/// answers `.pause`, as a download's file writer does while its queue is behind.
public protocol BodyReceiver: AnyObject, Sendable {
    /// Engine thread: the head of a response of this transfer, an interim (1xx) one and a
    /// redirect's included (the body that comes, if any, is the last one's). true: that body
    /// comes to `receive`, and `begin` is not called again for this transfer; false: it is
    /// kept in memory as any request's (`HTTPResponse.body`): an answer the job may still retry.
    /// A body-less answer (HEAD, 204) hears `begin` when its transfer ends.
    func begin(_ head: ResponseHead) -> Bool
    /// Engine thread: a piece of the body `begin` took, in order.
    func receive(_ bytes: UnsafeRawBufferPointer, resume: @escaping @Sendable () -> Void) -> BodyTake
    /// Engine thread: the transfer ended (`succeeded`: with a response; else failed or
    /// cancelled). `done` is called once, from any thread, when every byte taken has been
    /// delivered, with why one could not be (the transfer then fails with it).
    func transferEnded(succeeded: Bool, _ done: @escaping @Sendable (TransferError?) -> Void)
    /// Any thread: stop delivering now (a cancel, the engine stopping). A `done` still owed is
    /// called at once, with a cancel.
    func abandon()
    /// Why `receive` answered `.stop`.
    var failure: TransferError? { get }
    /// Whether its transfers run on the bulk thread (writes to a descriptor, large bodies)
    /// rather than beside the small requests.
    var runsOnBulkThread: Bool { get }
}

/// What a `BodySource` handed over.
public enum BodyRead: Sendable, Equatable {
    /// This many bytes (0: the end of the body).
    case bytes(Int)
    /// Nothing ready yet: the transfer is paused (CURL_READFUNC_PAUSE) until the `resume`
    /// given with it is called (from any thread).
    case pause
    /// The body cannot be read; `BodySource.failure` says why.
    case fail
}

/// A request body read as it comes, not from memory or a named file (`RequestBody.stream`):
/// the daemon's reader of a client's descriptor. Sent with Content-Length when `length` is
/// known, else chunked (HTTP/1.1) or as an HTTP/2 stream. It cannot be rewound once read.
public protocol BodySource: AnyObject, Sendable {
    /// Engine thread: up to `buffer.count` bytes of the body. Never waits.
    func read(into buffer: UnsafeMutableRawBufferPointer, resume: @escaping @Sendable () -> Void) -> BodyRead
    /// The body's length when the client said it (`Content-Length`); nil: unknown.
    var length: Int64? { get }
    /// Bytes handed to the transfer so far: once any were, the body cannot be sent again.
    var consumed: Int64 { get }
    /// Why `read` answered `.fail`.
    var failure: TransferError? { get }
    /// Whether its transfers run on the bulk thread.
    var runsOnBulkThread: Bool { get }
}

/// A `BodySource` as a value of `RequestBody` (equal when it is the same source).
public struct StreamedBody: Sendable, Equatable {
    public let source: any BodySource

    public init(_ source: any BodySource) {
        self.source = source
    }

    public static func == (a: StreamedBody, b: StreamedBody) -> Bool {
        a.source === b.source
    }
}
