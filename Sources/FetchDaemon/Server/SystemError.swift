import Glibc

/// An errno with the call that failed, for startup and socket errors.
struct SystemError: Error, CustomStringConvertible {
    let call: String
    let code: Int32
    static func last(_ call: String) -> SystemError { SystemError(call: call, code: errno) }
    var description: String { "\(call): \(String(cString: strerror(code)))" }
}
