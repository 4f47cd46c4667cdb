/// Server-Sent Events (`text/event-stream`) read as they arrive, in pieces of any size, by the
/// WHATWG HTML standard's rules ("Parsing an event stream" and "Interpreting an event stream"):
///
/// - one UTF-8 byte order mark at the start of a stream is dropped; invalid UTF-8 is replaced
///   (U+FFFD); a line ends at CRLF, LF or CR (a CRLF split between two pieces is one end);
/// - an empty line dispatches the event; a line that starts with `:` is a comment; otherwise the
///   field name is what comes before the first `:` (the whole line when there is none) and the
///   value what comes after it, less one leading space;
/// - `event` sets the event's type; `data` appends the value and a LF to the data; `id` sets
///   the last event ID, unless the value contains NUL; `retry` sets the reconnection time when
///   the value is ASCII digits only; any other field is ignored;
/// - at dispatch the stream's last event ID becomes the buffer's; an event whose data is empty
///   is not dispatched (the type is cleared as well); the data's last LF is removed; the type
///   is `message` unless an `event` field named one;
/// - at the end of a stream an event that no empty line ended is not dispatched.
///
/// The last event ID and the reconnection time outlive an event and a connection
/// (`newStream()`): a reconnection sends it as `Last-Event-ID`, and an event of the new stream
/// without an `id` keeps it. Pure: no I/O, no clock. A line, or an event's data, longer than
/// `maxBytes` fails the stream (kind `protocol`), so a server cannot make the daemon hold an
/// unbounded line.
public struct EventStreamParser: Sendable {
    public struct Event: Sendable, Equatable {
        /// `message` unless the event named its type.
        public var type: String
        public var data: String
        /// The stream's last event ID when the event was dispatched ("": none).
        public var lastEventID: String

        public init(type: String = "message", data: String, lastEventID: String = "") {
            self.type = type
            self.data = data
            self.lastEventID = lastEventID
        }
    }

    /// The longest line, and the most data one event may gather.
    public static let maxBytes = 1 << 20

    /// Set at each dispatch from the `id` fields seen (what `Last-Event-ID` sends).
    public private(set) var lastEventID = ""
    /// The last valid `retry` field, in milliseconds (nil: the server sent none).
    public private(set) var retryMs: Int?

    private let maxBytes: Int
    private var line: [UInt8] = []
    /// The last byte was a CR: a LF now ends nothing.
    private var afterCR = false
    /// Bytes of a byte order mark matched at the start of the stream; nil once past it.
    private var bomMatched: Int? = 0
    private var data: [UInt8] = []
    private var eventType: [UInt8] = []
    private var idBuffer: [UInt8] = []

    public init(maxBytes: Int = EventStreamParser.maxBytes) {
        self.maxBytes = maxBytes
    }

    private static let bom: [UInt8] = [0xEF, 0xBB, 0xBF]
    private static let lf: UInt8 = 0x0A, cr: UInt8 = 0x0D, colon: UInt8 = 0x3A, space: UInt8 = 0x20

    /// Reads the next piece of the stream; `dispatch` is called for each event it completes.
    public mutating func feed(_ bytes: UnsafeRawBufferPointer, _ dispatch: (Event) -> Void) throws(TransferError) {
        var index = 0
        let count = bytes.count
        if let matched = bomMatched {
            var matched = matched
            while index < count, matched < 3, bytes[index] == Self.bom[matched] {
                matched += 1
                index += 1
            }
            if matched == 3 {
                bomMatched = nil
            } else if index == count {
                // The piece ended inside what may yet be a byte order mark.
                bomMatched = matched
                return
            } else {
                // Not one: the bytes matched so far are the stream's first bytes.
                bomMatched = nil
                for byte in Self.bom[0..<matched] { try take(byte, dispatch) }
            }
        }
        while index < count {
            let byte = bytes[index]
            index += 1
            if byte == Self.lf || byte == Self.cr {
                try take(byte, dispatch)
                continue
            }
            afterCR = false
            // A run of ordinary bytes is appended at once.
            var end = index
            while end < count, bytes[end] != Self.lf, bytes[end] != Self.cr { end += 1 }
            line.append(byte)
            if end > index { line.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[index..<end])) }
            index = end
            if line.count > maxBytes { throw tooLong("a line") }
        }
    }

    /// `feed` for bytes in an array (tests, stub bodies).
    public mutating func feed(_ bytes: [UInt8], _ dispatch: (Event) -> Void) throws(TransferError) {
        try bytes.withBytes { (raw) throws(TransferError) in try feed(raw, dispatch) }
    }

    private mutating func take(_ byte: UInt8, _ dispatch: (Event) -> Void) throws(TransferError) {
        switch byte {
        case Self.lf:
            if afterCR {
                afterCR = false
                return
            }
            try endLine(dispatch)
        case Self.cr:
            afterCR = true
            try endLine(dispatch)
        default:
            afterCR = false
            line.append(byte)
            if line.count > maxBytes { throw tooLong("a line") }
        }
    }

    /// The stream ended: an event that no empty line ended is dropped, as is a last line
    /// without an end.
    public mutating func finish() {
        line.removeAll()
        data.removeAll()
        eventType.removeAll()
        afterCR = false
    }

    /// A new connection's stream begins (a byte order mark may start it again); the last event
    /// ID and the reconnection time are kept.
    public mutating func newStream() {
        finish()
        bomMatched = 0
        idBuffer = Array(lastEventID.utf8)
    }

    private mutating func endLine(_ dispatch: (Event) -> Void) throws(TransferError) {
        defer { line.removeAll(keepingCapacity: line.count <= 4096) }
        guard let first = line.first else { return dispatchEvent(dispatch) }
        if first == Self.colon { return }
        let name: ArraySlice<UInt8>
        var value: ArraySlice<UInt8>
        if let colon = line.firstIndex(of: Self.colon) {
            name = line[..<colon]
            value = line[(colon + 1)...]
            if value.first == Self.space { value = value.dropFirst() }
        } else {
            name = line[...]
            value = []
        }
        switch name.count {
        case 4 where name.elementsEqual("data".utf8):
            data.append(contentsOf: value)
            data.append(Self.lf)
            if data.count > maxBytes + 1 { throw tooLong("an event's data") }
        case 5 where name.elementsEqual("event".utf8):
            eventType = Array(value)
        case 2 where name.elementsEqual("id".utf8):
            if !value.contains(0) { idBuffer = Array(value) }
        case 5 where name.elementsEqual("retry".utf8):
            guard !value.isEmpty, value.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return }
            var ms = 0
            for digit in value {
                let (times, over1) = ms.multipliedReportingOverflow(by: 10)
                let (sum, over2) = times.addingReportingOverflow(Int(digit - 0x30))
                // Past Int: as long a time as can be said.
                if over1 || over2 { ms = Int.max; break }
                ms = sum
            }
            retryMs = ms
        default:
            break
        }
    }

    private mutating func dispatchEvent(_ dispatch: (Event) -> Void) {
        if !idBuffer.elementsEqual(lastEventID.utf8) { lastEventID = String(decoding: idBuffer, as: UTF8.self) }
        guard !data.isEmpty else {
            eventType.removeAll()
            return
        }
        data.removeLast()  // always the LF a data field appended
        let type = eventType.isEmpty ? "message" : String(decoding: eventType, as: UTF8.self)
        dispatch(Event(type: type, data: String(decoding: data, as: UTF8.self), lastEventID: lastEventID))
        data.removeAll(keepingCapacity: data.count <= 4096)
        eventType.removeAll()
    }

    private func tooLong(_ what: String) -> TransferError {
        TransferError(.protocol, "\(what) of the event stream is longer than \(maxBytes) bytes")
    }
}
