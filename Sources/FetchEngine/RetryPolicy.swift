public import FoundationEssentials
internal import CLinux
import Glibc

/// When to try a request again, as a pure function of what happened: no clock is read and
/// nothing waits here (the caller passes the time and does the waiting), so every decision
/// is reproducible in a test.
///
/// Waits grow exponentially from a first wait of 1-2 s (the jitter is drawn once per job and
/// doubles with the rest), each capped at `maxInterval`; a Retry-After on 429 or 503 is used
/// instead, capped the same way. It stops after `maxAttempts`, or when the next wait would
/// take the whole retry past 3 x maxInterval.
public struct RetryPolicy: Sendable, Equatable {
    /// Statuses retried unless the request names its own.
    public static let defaultStatuses: Set<Int> = [408, 429, 500, 502, 503, 504]
    /// Methods retried by default: repeating them cannot do twice what once would.
    public static let idempotentMethods: Set<String> = ["GET", "HEAD", "PUT", "DELETE", "OPTIONS"]
    /// Failures of the network worth another try.
    public static let retriedFailures: Set<TransferError.Kind> = [.connect, .reset, .timeout]
    /// Statuses whose Retry-After is honoured.
    public static let retryAfterStatuses: Set<Int> = [429, 503]

    public var enabled: Bool
    public var maxAttempts: Int
    /// Seconds.
    public var maxInterval: Double
    public var statuses: Set<Int>
    /// Seconds: a fixed wait before each retry instead of the backoff (curl's --retry-delay);
    /// the 3 x maxInterval budget then does not apply. A Retry-After still counts.
    public var delay: Double?
    /// Seconds from the job's start past which no retry begins (curl's --retry-max-time).
    public var maxElapsed: Double?
    /// Every failure of the network is retried, not only connect, reset and timeout (curl's
    /// --retry-all-errors).
    public var allErrors = false

    public init(enabled: Bool, maxAttempts: Int = 5, maxInterval: Double, statuses: Set<Int> = RetryPolicy.defaultStatuses) {
        self.enabled = enabled
        self.maxAttempts = maxAttempts
        self.maxInterval = maxInterval
        self.statuses = statuses
    }

    /// The defaults for a method: on for idempotent ones; 60 s cap for GET and HEAD, 600 s otherwise.
    public static func defaults(for method: String) -> RetryPolicy {
        let upper = method.uppercased()
        return RetryPolicy(
            enabled: idempotentMethods.contains(upper),
            maxInterval: upper == "GET" || upper == "HEAD" ? 60 : 600)
    }

    public enum Outcome: Sendable, Equatable {
        case status(Int, retryAfter: String?)
        case failure(TransferError.Kind)

        /// A 2xx or 3xx answer: nothing to retry, whatever the policy.
        public var isFinalSuccess: Bool {
            if case .status(let status, _) = self { return status < 400 }
            return false
        }
    }

    public enum Decision: Sendable, Equatable {
        /// Wait this many seconds, then try again.
        case retry(after: Double, reason: String)
        case stop
    }

    /// - Parameters:
    ///   - attempt: the number of the attempt that just ended, from 1.
    ///   - waitedSoFar: seconds already spent waiting between attempts of this job.
    ///   - jitter: drawn once per job from 0..<1; it sets the first wait in 1..<2 s.
    ///   - now: the wall clock, for a Retry-After given as a date.
    ///   - elapsed: seconds since the job began (for `maxElapsed`).
    public func decide(attempt: Int, outcome: Outcome, waitedSoFar: Double, jitter: Double, now: Date,
                       elapsed: Double = 0) -> Decision {
        guard enabled, attempt < maxAttempts else { return .stop }
        let reason: String
        var wait = delay ?? min((1 + jitter) * Glibc.pow(2, Double(attempt - 1)), maxInterval)
        switch outcome {
        case .status(let status, let retryAfter):
            guard statuses.contains(status) else { return .stop }
            reason = "status \(status)"
            if Self.retryAfterStatuses.contains(status), let retryAfter,
               let asked = RetryAfter.seconds(from: retryAfter, now: now) {
                wait = min(asked, maxInterval)
            }
        case .failure(let kind):
            guard allErrors || Self.retriedFailures.contains(kind) else { return .stop }
            reason = kind.rawValue
        }
        guard delay != nil || waitedSoFar + wait <= 3 * maxInterval else { return .stop }
        if let maxElapsed, elapsed + wait > maxElapsed { return .stop }
        return .retry(after: wait, reason: reason)
    }
}

/// Reads a Retry-After value: delay-seconds, or an HTTP date (RFC 9110 section 10.2.3).
public enum RetryAfter {
    public static func seconds(from value: String, now: Date) -> Double? {
        let text = value.trimmingBlanks()
        if !text.isEmpty, text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) {
            return Double(text)
        }
        guard let date = httpDate(text) else { return nil }
        return max(0, date.timeIntervalSince(now))
    }

    /// IMF-fixdate, and the obsolete RFC 850 and asctime forms that senders may still use.
    static func httpDate(_ text: String) -> Date? {
        let seconds = fetchd_parse_http_date(text)
        return seconds == -1 ? nil : Date(timeIntervalSince1970: Double(seconds))
    }
}
