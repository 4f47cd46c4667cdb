import Glibc

/// A body cut into lines as it arrives, in pieces of any size (NDJSON, a log, `docker events`):
/// each line without its LF or CRLF (a CR elsewhere is kept), invalid UTF-8 replaced (U+FFFD),
/// empty lines included; `finish` hands out a last line that no newline ended. A line longer
/// than `maxBytes` fails the body (kind `protocol`): at most that much is ever held. Pure: no
/// I/O.
public struct LineSplitter: Sendable {
    /// The longest line (its newline not counted).
    public static let maxBytes = 1 << 20

    /// Lines handed out so far.
    public private(set) var lines = 0

    private let maxBytes: Int
    /// The start of a line whose end has not come yet.
    private var partial: [UInt8] = []

    public init(maxBytes: Int = LineSplitter.maxBytes) {
        self.maxBytes = maxBytes
    }

    /// Reads the next piece of the body; `emit` is called for each line it ends.
    public mutating func feed(_ bytes: UnsafeRawBufferPointer, _ emit: (String) -> Void) throws(TransferError) {
        guard let base = bytes.baseAddress else { return }
        var start = 0
        let count = bytes.count
        while start < count,
              let found = memchr(base + start, 0x0A, count - start) {
            let end = base.distance(to: UnsafeRawPointer(found))
            if partial.isEmpty {
                try emitLine(UnsafeRawBufferPointer(rebasing: bytes[start..<end]), emit)
            } else {
                partial.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[start..<end]))
                let whole = partial
                partial.removeAll(keepingCapacity: whole.count <= 64 << 10)
                try whole.withBytes { (raw) throws(TransferError) in try emitLine(raw, emit) }
            }
            start = end + 1
        }
        guard start < count else { return }
        partial.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[start..<count]))
        // One byte more than the limit may be the CR of a CRLF still to come.
        if partial.count > maxBytes + 1 || (partial.count == maxBytes + 1 && partial.last != 0x0D) {
            throw tooLong()
        }
    }

    /// `feed` for bytes in an array (tests, stub bodies).
    public mutating func feed(_ bytes: [UInt8], _ emit: (String) -> Void) throws(TransferError) {
        try bytes.withBytes { (raw) throws(TransferError) in try feed(raw, emit) }
    }

    /// The body ended: a last line without a newline is handed out as it is.
    public mutating func finish(_ emit: (String) -> Void) throws(TransferError) {
        guard !partial.isEmpty else { return }
        let last = partial
        partial = []
        if last.count > maxBytes { throw tooLong() }
        lines += 1
        emit(String(decoding: last, as: UTF8.self))
    }

    /// A new body begins (what was left of the last one is dropped); the count goes on.
    public mutating func reset() {
        partial = []
    }

    private mutating func emitLine(_ raw: UnsafeRawBufferPointer, _ emit: (String) -> Void) throws(TransferError) {
        var line = raw
        if line.last == 0x0D { line = UnsafeRawBufferPointer(rebasing: line.dropLast()) }
        if line.count > maxBytes { throw tooLong() }
        lines += 1
        emit(String(decoding: line, as: UTF8.self))
    }

    private func tooLong() -> TransferError {
        TransferError(.protocol, "a line of the body is longer than \(maxBytes) bytes")
    }
}

extension Array where Element == UInt8 {
    /// `withUnsafeBytes` for a body that throws only a `TransferError`.
    func withBytes(_ body: (UnsafeRawBufferPointer) throws(TransferError) -> Void) throws(TransferError) {
        let result: Result<Void, TransferError> = withUnsafeBytes { raw in
            do throws(TransferError) {
                try body(raw)
                return .success(())
            } catch {
                return .failure(error)
            }
        }
        try result.get()
    }
}
