import Dispatch
import FetchEngine
import Glibc
internal import CLinux

/// What systemd hands a service, read once at start (no libsystemd: the protocol is a few
/// lines). Socket activation (sd_listen_fds(3)): `LISTEN_PID` is ours and `LISTEN_FDS` is
/// at least 1: descriptor 3 is the listening socket to serve, and it is systemd's: never
/// unlinked. Notification (sd_notify(3)): `NOTIFY_SOCKET` is a datagram socket to send
/// `READY=1`, `STOPPING=1` and, when `WATCHDOG_USEC` is set (and `WATCHDOG_PID`, when set, is
/// ours), `WATCHDOG=1` at half that interval. The variables are removed from the
/// environment, so that programs the daemon starts (auth helpers) do not see them.
struct Systemd: Sendable {
    /// The passed listening socket (descriptor 3), if any.
    let listenFD: Int32?
    let notifySocket: String?
    /// Microseconds between watchdog pings systemd expects at most.
    let watchdogMicroseconds: Int?

    static let firstPassedFD: Int32 = 3

    static func fromEnvironment(_ environment: [String: String]) throws(StartupError) -> Systemd {
        let pid = Int(getpid())
        var listenFD: Int32? = nil
        if let fds = environment["LISTEN_FDS"], let listenPID = environment["LISTEN_PID"], Int(listenPID) == pid {
            guard let count = Int(fds), count >= 1 else {
                throw StartupError("LISTEN_FDS=\(fds): expected a number of passed sockets, at least 1")
            }
            if count > 1 {
                throw StartupError("LISTEN_FDS=\(count): fetchd serves one socket; give the unit one ListenStream=")
            }
            guard fetchd_is_unix_listener(firstPassedFD) == 1 else {
                throw StartupError("the socket systemd passed (descriptor 3) is not a listening Unix stream socket (ListenStream=PATH)")
            }
            guard fetchd_adopt_listener(firstPassedFD) == 0 else {
                throw StartupError("the socket systemd passed: \(String(cString: strerror(errno)))")
            }
            listenFD = firstPassedFD
        }
        let notify = environment["NOTIFY_SOCKET"].flatMap { $0.isEmpty ? nil : $0 }
        var watchdog: Int? = nil
        if let usec = environment["WATCHDOG_USEC"].flatMap(Int.init), usec > 0,
           environment["WATCHDOG_PID"].map({ Int($0) == pid }) ?? true {
            watchdog = usec
        }
        for name in ["LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES", "NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"] {
            unsetenv(name)
        }
        return Systemd(listenFD: listenFD, notifySocket: notify, watchdogMicroseconds: watchdog)
    }

    /// Sends one state change (`READY=1`, `STOPPING=1` ...); nothing without NOTIFY_SOCKET.
    func notify(_ state: String, log: Logger) {
        guard let notifySocket else { return }
        let code = state.withCString { fetchd_notify_datagram(notifySocket, $0, UInt(strlen($0))) }
        if code != 0 { log.warning("NOTIFY_SOCKET \(notifySocket): \(String(cString: strerror(-code)))") }
    }
}
