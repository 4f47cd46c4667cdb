import FoundationEssentials

/// Times as clients read them: ISO 8601 in UTC with milliseconds (HAR's `startedDateTime`, the
/// cache's `_storedAt`, getRateLimits' `pausedUntil`, getAuth's `expiresAt`).
enum ISO8601Format {
    static func string(_ date: Date) -> String {
        date.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
    }
}
