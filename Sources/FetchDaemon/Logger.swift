import FoundationEssentials
import Glibc

/// The daemon's own diagnostic log: one line per event on stderr, with a level.
/// Quiet by default (notices, warnings and errors); `--verbose` adds info and debug.
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

    public let minimum: Level

    public init(minimum: Level) { self.minimum = minimum }

    public func log(_ level: Level, _ message: @autoclosure () -> String) {
        guard level >= minimum else { return }
        let line = "fetchd[\(getpid())] \(level.label): \(message())\n"
        // One write call per line keeps lines from different threads whole.
        _ = line.utf8CString.withUnsafeBufferPointer { write(STDERR_FILENO, $0.baseAddress, $0.count - 1) }
    }

    public func debug(_ message: @autoclosure () -> String) { log(.debug, message()) }
    public func info(_ message: @autoclosure () -> String) { log(.info, message()) }
    public func notice(_ message: @autoclosure () -> String) { log(.notice, message()) }
    public func warning(_ message: @autoclosure () -> String) { log(.warning, message()) }
    public func error(_ message: @autoclosure () -> String) { log(.error, message()) }
}
