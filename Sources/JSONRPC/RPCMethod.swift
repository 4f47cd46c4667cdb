/// What a method handler learns about the connection its request came on.
public struct RPCContext: Sendable {
    public let connectionID: UInt64
    /// Pushes a notification to this connection (it may be coalesced or dropped for a
    /// slow reader; answers never are).
    public let notify: @Sendable (_ method: String, _ params: JSONValue) -> Void
    /// The descriptors that came with the request's line (SCM_RIGHTS), for the methods that
    /// take some (fetch's `bodyTo` and `bodyFrom`); nil: none came.
    public var descriptors: LineDescriptors? = nil

    public init(connectionID: UInt64, notify: @escaping @Sendable (String, JSONValue) -> Void) {
        self.connectionID = connectionID
        self.notify = notify
    }
}

/// One JSON-RPC method. Implementations live one per file, decode their params once into a
/// typed value, and throw whatever they like: the dispatcher's error mapper turns it into
/// a JSON-RPC error in one place.
public protocol RPCMethod: Sendable {
    static var name: String { get }
    func call(_ params: JSONValue?, context: RPCContext) async throws -> JSONValue
}

/// A method cheap enough to answer on the thread that read the request, without a task:
/// it must not block and must not wait on anything (ping, status, cancel, listings).
public protocol InlineRPCMethod: RPCMethod {
    func callInline(_ params: JSONValue?, context: RPCContext) throws -> JSONValue
}

extension InlineRPCMethod {
    public func call(_ params: JSONValue?, context: RPCContext) async throws -> JSONValue {
        try callInline(params, context: context)
    }
}

/// A method that starts its work on the thread that read the request and answers later,
/// from whatever thread finishes it, through `reply` (called exactly once). No task and no
/// thread hop sit between reading the request and starting the work, nor between the work
/// ending and the answer being written. `start` must not block; what it throws is the answer.
public protocol ReplyingRPCMethod: RPCMethod {
    typealias Reply = @Sendable (Result<JSONValue, any Error>) -> Void
    func start(_ params: JSONValue?, context: RPCContext, reply: @escaping Reply) throws
}

extension ReplyingRPCMethod {
    public func call(_ params: JSONValue?, context: RPCContext) async throws -> JSONValue {
        try await withUnsafeThrowingContinuation { continuation in
            do {
                try start(params, context: context) { continuation.resume(with: $0) }
            } catch {
                continuation.resume(throwing: error)
            }
        }
    }
}
