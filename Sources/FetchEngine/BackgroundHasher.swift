import Dispatch
import Synchronization

/// Runs SHA-256 updates on a serial queue of its own, one block at a time. When blocks of more
/// than `maxPendingBytes` (counted by their capacity: a block written at the end of a short
/// read holds less) wait, the writer pauses its transfer (`pauseIfBehind`) until the queue is
/// down to half of that, so memory stays bounded when hashing falls behind (the portable
/// SHA-256 does about 175 MB/s) and the engine thread never waits for it: an engine thread
/// that waits on the queue stalls every other client's requests while a fast server sends a
/// download (pings on another connection: 400 ms at the median). Hashed blocks are kept for
/// the writer to fill again (no more are ever made than fit under that bound, plus the one
/// being filled): a fresh 512 KiB allocation per read, freed on another thread, grows the
/// heap to 100 MB during a 1 GiB download.
final class BackgroundHasher: @unchecked Sendable {
    static let maxPendingBytes = 4 << 20
    let queue: DispatchQueue
    private var hasher: SHA256  // queue only
    private struct Backlog {
        var bytes = 0
        /// Set while the writer's transfer is paused; called once the backlog has halved.
        var resume: (@Sendable () -> Void)?
    }
    private let backlog = Locked(Backlog())
    private let spares = Locked<[BodyBlock]>([])
    /// Why a write on the queue failed (set there, once); later blocks are neither written nor hashed.
    private let failedWrite = Locked<String?>(nil)
    var writeFailure: String? { failedWrite.withLock { $0 } }

    /// `queue` is for tests, which hold it to make the hash fall behind.
    init(_ start: SHA256, queue: DispatchQueue = DispatchQueue(label: "fetchd.sha256")) {
        hasher = start
        self.queue = queue
    }

    /// True, and `resume` kept to be called later, when too much waits to be hashed.
    func pauseIfBehind(resume: @escaping @Sendable () -> Void) -> Bool {
        backlog.withLock { b -> Bool in
            guard b.bytes > Self.maxPendingBytes else { return false }
            b.resume = resume
            return true
        }
    }

    /// Writes the block to the file (if `writing` says where), hashes it on the queue, then
    /// runs `then` there (if given). After a failed write nothing more is written or hashed.
    func update(taking block: BodyBlock, writing: FileWrite? = nil, then: (@Sendable () -> Void)? = nil) {
        let size = block.capacity
        backlog.withLock { $0.bytes += size }
        queue.async { [self] in
            if failedWrite.withLock({ $0 == nil }) {
                if let writing, let failure = writing.write(block.bytes) {
                    failedWrite.withLock { $0 = failure }
                } else {
                    hasher.update(block.bytes)
                    then?()
                }
            }
            let resume = backlog.withLock { b -> (@Sendable () -> Void)? in
                b.bytes -= size
                guard b.bytes <= Self.maxPendingBytes / 2, let resume = b.resume else { return nil }
                b.resume = nil
                return resume
            }
            block.count = 0
            spares.withLock { $0.append(block) }
            resume?()
        }
    }

    /// An emptied block, when one is free.
    func spareBlock() -> BodyBlock? {
        spares.withLock { $0.popLast() }
    }

    /// After the blocks already queued (a restart from zero): nobody waits for it.
    func reset(to start: SHA256) {
        queue.async { [self] in hasher = start }
    }

    /// Waits for every queued piece, then returns the state.
    func result() -> SHA256 {
        queue.sync { hasher }
    }
}

/// The digest of a download, finished once its hashing queue has hashed every block.
final class PendingDigest: Sendable {
    private let hasher: BackgroundHasher
    private let value = Locked<String?>(nil)

    init(_ hasher: BackgroundHasher) {
        self.hasher = hasher
    }

    var hex: String {
        if let known = value.withLock({ $0 }) { return known }
        var state = hasher.result()
        let hex = state.finishHex()
        value.withLock { $0 = hex }
        return hex
    }
}
