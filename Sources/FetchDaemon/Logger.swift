import FoundationEssentials
import Glibc
import Synchronization

private final class LevelBox: Sendable {
    let value: Atomic<Int>
    init(_ value: Int) { self.value = Atomic(value) }
}

/// The daemon's own diagnostic log: one line per event on stderr, with a level.
/// Quiet by default (notices, warnings and errors); `--verbose` adds info and debug.
///
/// Every message goes through two rules here, whoever wrote it: URLs in it lose their
/// secrets (`URLRedaction`), and control characters are escaped (`escaped`), so that text a
/// client chose (a jobId, a comment, a URL) can neither forge a line nor send a terminal
/// escape sequence.
public struct Logger: Sendable {
    public enum Level: Int, Sendable, Comparable {
        case debug, info, notice, warning, error
        public static func < (a: Level, b: Level) -> Bool { a.rawValue < b.rawValue }
        var label: String {
            switch self {
            case .debug: "debug"
            case .info: "info"
            case .notice: "notice"
            case .warning: "warning"
            case .error: "error"
            }
        }
    }

    /// Shared by every copy, so that a reload (--config's `verbose`) reaches them all.
    private let level: LevelBox

    public var minimum: Level { Level(rawValue: level.value.load(ordering: .relaxed)) ?? .notice }

    public init(minimum: Level) { level = LevelBox(minimum.rawValue) }

    /// Changes the level of this logger and of every copy of it.
    public func setMinimum(_ minimum: Level) { level.value.store(minimum.rawValue, ordering: .relaxed) }

    public func log(_ level: Level, _ message: @autoclosure () -> String) {
        guard level >= minimum else { return }
        let line = "fetchd[\(getpid())] \(level.label): \(Self.line(message()))\n"
        // One write call per line keeps lines from different threads whole.
        _ = line.utf8CString.withUnsafeBufferPointer { write(STDERR_FILENO, $0.baseAddress, $0.count - 1) }
    }

    /// What the log prints for `message`: its URLs redacted, then escaped to one line.
    static func line(_ message: String) -> String {
        escaped(URLRedaction.redactURLs(in: message))
    }

    /// `message` on one line of printable text: a backslash becomes `\\`, LF, CR and TAB
    /// `\n`, `\r`, `\t`, every other C0 control, DEL and C1 control `\u00XX`, and the
    /// Unicode line and paragraph separators `\u2028`, `\u2029`. Bytes that were not UTF-8
    /// never get here: Swift strings made from them hold U+FFFD instead.
    static func escaped(_ message: String) -> String {
        guard message.unicodeScalars.contains(where: needsEscape) else { return message }
        var out = String.UnicodeScalarView()
        for scalar in message.unicodeScalars {
            guard needsEscape(scalar) else {
                out.append(scalar)
                continue
            }
            let text: String
            switch scalar {
            case "\\": text = "\\\\"
            case "\n": text = "\\n"
            case "\r": text = "\\r"
            case "\t": text = "\\t"
            default:
                let hex = String(scalar.value, radix: 16, uppercase: true)
                text = "\\u" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
            }
            out.append(contentsOf: text.unicodeScalars)
        }
        return String(out)
    }

    private static func needsEscape(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x00...0x1F, 0x5C, 0x7F...0x9F, 0x2028, 0x2029: true
        default: false
        }
    }

    public func debug(_ message: @autoclosure () -> String) { log(.debug, message()) }
    public func info(_ message: @autoclosure () -> String) { log(.info, message()) }
    public func notice(_ message: @autoclosure () -> String) { log(.notice, message()) }
    public func warning(_ message: @autoclosure () -> String) { log(.warning, message()) }
    public func error(_ message: @autoclosure () -> String) { log(.error, message()) }
}
