/// What the cache stage keeps between a job's attempts.
struct CacheState: Sendable {
    var key: CacheStage.Key?
    /// What the result's `cache` field says (nil: no cache).
    var outcome: CacheOutcome?
    /// The stored response the attempt's validators came from.
    var validating: CacheStore.Entry?
    /// When the attempt's request went (RFC 9111's request_time).
    var sentAt = 0.0
    /// Decided when the attempt ended, taken by `judge`; then served by the next step.
    var pending: CacheStage.Serve?
    var serveNext: CacheStage.Serve?
    /// The collapse key this job's transfer leads.
    var leads: String?
    /// The attempt was answered by the cache.
    var served = false
    /// A download's answer, stored when the job ends.
    var landing: CacheStage.Landing?
    /// Bytes of a body read from the store, counted in the client's budget until `ended`.
    var reserved = 0
    /// The stored response that answered, or that the validators came from.
    var used: CacheStore.Entry?
    /// What a hold found, taken by `answerAfterHold`.
    var heldAnswer: AttemptOutcome?
}

extension CacheState: DefaultJobState {}

extension Optional {
    /// The value, leaving nil behind.
    mutating func take() -> Wrapped? {
        defer { self = nil }
        return self
    }
}
