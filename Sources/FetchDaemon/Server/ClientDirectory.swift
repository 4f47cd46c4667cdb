import FetchEngine
import FoundationEssentials
import Glibc

/// The client process behind each connection: its pid from SO_PEERCRED at accept, its
/// command read from /proc the first time an event names it (only while someone subscribes).
final class ClientDirectory: Sendable {
    struct Client: Sendable {
        let pid: Int32
        var command: String?
        var commandRead = false
    }

    private let clients = Locked<[UInt64: Client]>([:])

    func opened(_ connectionID: UInt64, pid: Int32) {
        clients.withLock { $0[connectionID] = Client(pid: pid) }
    }

    func closed(_ connectionID: UInt64) {
        clients.withLock { _ = $0.removeValue(forKey: connectionID) }
    }

    func client(_ connectionID: UInt64) -> Client? {
        guard var client = clients.withLock({ $0[connectionID] }) else { return nil }
        guard !client.commandRead else { return client }
        client.command = Self.command(of: client.pid)
        client.commandRead = true
        let known = client
        clients.withLock { if $0[connectionID] != nil { $0[connectionID] = known } }
        return client
    }

    static let maxCommandBytes = 256

    /// /proc/PID/cmdline with its NULs as spaces, else /proc/PID/comm; nil when the process is gone.
    static func command(of pid: Int32) -> String? {
        let separator = UInt8(ascii: " ")
        for file in ["cmdline", "comm"] {
            let fd = open("/proc/\(pid)/\(file)", O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { continue }
            var bytes = [UInt8](repeating: 0, count: maxCommandBytes)
            let n = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            close(fd)
            guard n > 0 else { continue }
            // NULs between the arguments, and any control character in them, become spaces.
            var text = bytes[0..<n].map { $0 < 0x20 || $0 == 0x7f ? separator : $0 }
            while text.last == separator || text.last == UInt8(ascii: "\n") { text.removeLast() }
            if !text.isEmpty { return String(decoding: text, as: UTF8.self) }
        }
        return nil
    }
}
