/// When a Server-Sent Events job connects again, as a pure function of how each connection
/// ended and of the time (passed in, in seconds on any one clock: nothing here reads a clock
/// or waits).
///
/// Until a stream has opened (a 200 `text/event-stream` head), the job is any request: its
/// retry policy judges a failure or a status, and its final answer is the result. From then on:
/// - a stream that ended (the server closed it) or failed is connected again after the
///   server's last `retry` (`defaultRetryMs` without one), as a new attempt of the same job;
/// - an answer that is not a 200 `text/event-stream` (a 204 among them) is the job's result;
/// - a connection that fails before its head ends the job with that failure;
/// - a reconnection that would start at or past the deadline (`maxTime`), or a stream cut by
///   it, ends the job at its deadline.
public struct EventStreamReconnection: Sendable, Equatable {
    /// The wait before a reconnection when the server sent no `retry` field.
    public static let defaultRetryMs = 1000

    /// Streams opened: answers whose head was a 200 `text/event-stream`.
    public private(set) var streams = 0
    /// Reconnections decided so far.
    public private(set) var reconnects = 0

    public init() {}

    /// How one connection ended.
    public enum Ended: Sendable, Equatable {
        /// An answer whose body ended: the server closed its stream, or it was no stream.
        case answer(status: Int, contentType: String?)
        /// The transfer failed. `streaming`: after the head of a stream, while reading its events.
        case failure(TransferError.Kind, streaming: Bool)
    }

    public enum Decision: Sendable, Equatable {
        /// No stream has opened yet: judged as any request's attempt (its retry policy).
        case asAnyRequest
        /// Connect again after this many milliseconds.
        case reconnect(afterMs: Int)
        /// This answer is the job's result.
        case result
        /// The failure ends the job.
        case fail
        /// The job's deadline ends it.
        case deadline
    }

    /// Whether an answer's head opens an event stream: a 200 whose media type is
    /// `text/event-stream` (parameters and case aside).
    public static func opensStream(status: Int, contentType: String?) -> Bool {
        guard status == 200, let contentType else { return false }
        let type = contentType.split(separator: ";", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        return type.trimmingBlanks().lowercased() == "text/event-stream"
    }

    /// A stream's head arrived.
    public mutating func opened() {
        streams += 1
    }

    /// The decision on a connection that ended. `retryMs`: the server's last `retry` (nil:
    /// none); `now` and `deadline` in seconds (nil: no deadline).
    public mutating func decide(_ ended: Ended, retryMs: Int?, now: Double, deadline: Double?) -> Decision {
        switch ended {
        case .answer(let status, let contentType):
            guard streams > 0 else { return .asAnyRequest }
            guard Self.opensStream(status: status, contentType: contentType) else { return .result }
        case .failure(let kind, let streaming):
            guard streams > 0 else { return .asAnyRequest }
            guard streaming else { return .fail }
            // The transfer's timeout was cut to the deadline (within the engine's 20 ms).
            if kind == .timeout, let deadline, now >= deadline - 0.02 { return .deadline }
        }
        let wait = max(0, retryMs ?? Self.defaultRetryMs)
        if let deadline, now + Double(wait) / 1000 >= deadline { return .deadline }
        reconnects += 1
        return .reconnect(afterMs: wait)
    }
}
