/// Splits a byte stream into newline-delimited messages.
///
/// A line longer than `maxLineBytes` is discarded up to its newline and reported once as
/// `.tooLarge`, so one oversize message never costs the connection. `\r\n` is accepted and
/// blank lines are skipped.
public struct LineFramer: Sendable {
    public enum Event: Equatable, Sendable {
        case line([UInt8])
        case tooLarge
    }

    public let maxLineBytes: Int
    private var pending: [UInt8] = []
    private var discarding = false

    public init(maxLineBytes: Int) {
        self.maxLineBytes = maxLineBytes
    }

    /// Bytes held for a line not yet ended.
    public var bufferedByteCount: Int { pending.count }

    public mutating func feed(_ bytes: UnsafeRawBufferPointer) -> [Event] {
        var events: [Event] = []
        var start = 0
        let count = bytes.count
        while start < count {
            guard let newline = firstNewline(in: bytes, from: start) else {
                append(bytes, from: start, to: count, events: &events)
                break
            }
            append(bytes, from: start, to: newline, events: &events)
            if discarding {
                discarding = false
            } else {
                var line = pending
                // A large line's buffer is not kept for the connection's whole life.
                pending.removeAll(keepingCapacity: pending.count <= Self.keptCapacityBytes)
                if line.last == UInt8(ascii: "\r") { line.removeLast() }
                if !line.allSatisfy(Self.isBlank) { events.append(.line(line)) }
            }
            start = newline + 1
        }
        return events
    }

    /// Buffers up to this size are reused for the next line.
    static let keptCapacityBytes = 64 << 10

    /// Drops the line being gathered (its bytes and the rest of it, up to its newline), as if
    /// it had been too long. False when no line was being gathered.
    public mutating func abandonLine() -> Bool {
        guard !pending.isEmpty, !discarding else { return false }
        pending = []
        discarding = true
        return true
    }

    public mutating func feed(_ bytes: [UInt8]) -> [Event] {
        bytes.withUnsafeBytes { feed($0) }
    }

    private mutating func append(_ bytes: UnsafeRawBufferPointer, from: Int, to: Int, events: inout [Event]) {
        guard !discarding, to > from else { return }
        if pending.count + (to - from) > maxLineBytes {
            pending.removeAll(keepingCapacity: false)
            discarding = true
            events.append(.tooLarge)
            return
        }
        pending.append(contentsOf: bytes[from..<to])
    }

    private func firstNewline(in bytes: UnsafeRawBufferPointer, from: Int) -> Int? {
        var index = from
        while index < bytes.count {
            if bytes[index] == UInt8(ascii: "\n") { return index }
            index += 1
        }
        return nil
    }

    private static func isBlank(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") || byte == UInt8(ascii: "\r")
    }
}
