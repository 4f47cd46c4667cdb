/// Fair turns for bulk transfers on the one engine thread. libcurl reads a readable socket up
/// to 100 times its receive buffer in one `curl_multi_perform` (100 x 512 KiB for a download),
/// so four downloads from a fast server held every other request (a small GET, a ping's
/// answer) for hundreds of milliseconds each time the loop went round. Here a transfer takes
/// at most `quantum` bytes of body per turn of the loop: past that, its write callback pauses
/// it, and the next turn unpauses it after everything else had its go.
///
/// Engine thread only (the write callback and the loop both run there).
final class FairTurns {
    /// Bytes of body one transfer takes in one turn. 256 KiB: four transfers' share of a turn
    /// is about a millisecond of copying and writing.
    static let quantum = 256 << 10

    /// The loop's current turn; a transfer's count of bytes starts again when it changes.
    private(set) var turn: UInt64 = 1
    /// Transfers paused because they used up this turn's share.
    private(set) var yielded: [UInt64] = []

    var hasYielded: Bool { !yielded.isEmpty }

    /// Set by the loop each time round: one transfer or none on this thread, so there is no
    /// one to be fair to, and nothing is paused. Pausing a lone download every 256 KiB costs
    /// libcurl a copy of each held-back piece and the bulk thread a quarter of its CPU (0.83
    /// against 0.61 s per GiB).
    var alone = false

    private let thread = OneThread()

    /// Whether the transfer may take `length` more bytes this turn; when not, it is recorded
    /// to be unpaused next turn and its write callback returns CURL_WRITEFUNC_PAUSE (libcurl
    /// keeps the piece and gives it again once unpaused).
    func mayTake(_ length: Int, turnSeen: inout UInt64, turnBytes: inout Int, id: UInt64) -> Bool {
        assert(thread.isOwner, "FairTurns is one engine thread's")
        if alone { return true }
        if turnSeen != turn {
            turnSeen = turn
            turnBytes = 0
        }
        guard turnBytes < Self.quantum else {
            yielded.append(id)
            return false
        }
        turnBytes += length
        return true
    }

    /// Starts a new turn; returns the transfers to unpause.
    func nextTurn() -> [UInt64] {
        assert(thread.isOwner, "FairTurns is one engine thread's")
        turn &+= 1
        guard !yielded.isEmpty else { return [] }
        let ids = yielded
        yielded.removeAll(keepingCapacity: true)
        return ids
    }
}
