import CLinux
import FetchEngine

/// The ids the daemon gives jobs: `job-` and 16 hex digits, 64 bits from the kernel's CSPRNG
/// (getrandom). Any client may cancel, attach to or look at a job by its id, so an id must
/// not be guessable from another (as counted ids, `job-1`, `job-2` ..., would be). Drawn 32
/// ids at a time, so a job costs no system call of its own.
final class JobIDs: Sendable {
    private static let idsPerDraw = 32
    private let pool = Locked<(bytes: [UInt8], next: Int)>(([], 0))

    func next() -> String {
        let value = pool.withLock { pool -> UInt64 in
            if pool.next + 8 > pool.bytes.count {
                pool.bytes = Self.randomBytes(8 * Self.idsPerDraw)
                pool.next = 0
            }
            defer { pool.next += 8 }
            return pool.bytes[pool.next..<(pool.next + 8)].reduce(0) { $0 << 8 | UInt64($1) }
        }
        let hex = String(value, radix: 16)
        return "job-" + String(repeating: "0", count: 16 - hex.utf8.count) + hex
    }

    private static func randomBytes(_ count: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        let result = bytes.withUnsafeMutableBytes { fetchd_random_bytes($0.baseAddress, UInt($0.count)) }
        // getrandom fails only on a kernel without it (before 3.17) or with a bad buffer.
        precondition(result == 0, "getrandom failed: \(result)")
        return bytes
    }
}
