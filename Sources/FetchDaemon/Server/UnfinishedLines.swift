import Synchronization

/// The bytes of request lines that every connection has begun and not yet ended, together.
/// Each line is bounded on its own (`--max-message-bytes`), but ten clients that each hold a
/// 15 MiB partial line cost 168 MB: past `limit` in all, a connection holding more than
/// `abandonAboveBytes` of a line has that line dropped (-32006), so what partial lines cost
/// stays bounded whatever clients do.
final class UnfinishedLines: Sendable {
    let limit: Int
    private let total = Atomic<Int>(0)
    /// Short partial lines (the usual case: a line split across reads) are never dropped.
    static let abandonAboveBytes = 1 << 20

    init(maxMessageBytes: Int) {
        limit = max(64 << 20, 2 * maxMessageBytes)
    }

    /// Adds `delta` (negative: released) and tells whether the total is now over the limit.
    func change(by delta: Int) -> Bool {
        total.add(delta, ordering: .relaxed).newValue > limit
    }

    var bytes: Int { total.load(ordering: .relaxed) }
}
