import FetchEngine
import FoundationEssentials
import Glibc
internal import CLinux
import Synchronization

/// `--metrics-listen ADDR:PORT`: Prometheus' text at `GET /metrics` over plain HTTP/1.1, on a
/// thread of its own that sleeps in poll() (an idle daemon is not woken). Any local user can
/// reach the port, so no connection may hold up another's scrape: every connection is served
/// at once, with non-blocking reads and writes, and each has 5 s in all from its accept to
/// the end of its answer, however slowly its bytes come (one that is idle or drips a byte at
/// a time is closed then). At most `maxConnections` are open; a new one past that closes the
/// oldest. The connection is closed after each answer. Other paths get 404, other methods 405.
final class MetricsListener: Sendable {
    let address: String
    private let fd: Int32
    /// Written by `stop` to wake the thread's poll.
    private let wake: Int32
    private let render: @Sendable () -> String
    private let log: Logger
    private let stopped = Atomic<Bool>(false)

    static let deadlineNanoseconds: UInt64 = 5_000_000_000
    static let maxRequestBytes = 8192
    static let maxConnections = 16

    init(_ listen: DaemonOptions.ListenAddress, log: Logger, render: @escaping @Sendable () -> String) throws {
        var loopback: Int32 = 0
        let fd = fetchd_tcp_listen(listen.host, Int32(listen.port), &loopback)
        guard fd >= 0 else {
            throw StartupError("--metrics-listen \(listen): \(String(cString: strerror(-fd)))")
        }
        // The contract: loopback only. Anyone who can reach the endpoint sees the hosts this
        // daemon fetches from and how much; a scraper elsewhere goes through a proxy it trusts.
        guard loopback != 0 else {
            close(fd)
            throw StartupError("--metrics-listen \(listen): not a loopback address (only 127.0.0.0/8 and ::1 are served)")
        }
        let wake = fetchd_eventfd()
        guard wake >= 0, fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            if wake >= 0 { close(wake) }
            throw StartupError("--metrics-listen \(listen): \(reason)")
        }
        self.fd = fd
        self.wake = wake
        self.render = render
        self.log = log
        address = listen.description
    }

    func start() {
        NamedThread.start("fetchd-metrics") { [self] in serve() }
    }

    func stop() {
        stopped.store(true, ordering: .relaxed)
        var one: UInt64 = 1
        _ = write(wake, &one, 8)
    }

    /// One scrape's connection: its request as it arrives, then its answer as it leaves.
    private final class Client {
        let fd: Int32
        let deadline: UInt64
        var request: [UInt8] = []
        /// The answer, once the request is whole; `sent` bytes of it are written.
        var answer: [UInt8]?
        var sent = 0

        init(fd: Int32, deadline: UInt64) {
            self.fd = fd
            self.deadline = deadline
        }
    }

    private func serve() {
        var clients: [Client] = []
        var buffer = [UInt8](repeating: 0, count: 2048)
        while !stopped.load(ordering: .relaxed) {
            var fds = [pollfd(fd: wake, events: Int16(POLLIN), revents: 0), pollfd(fd: fd, events: Int16(POLLIN), revents: 0)]
            for client in clients {
                fds.append(pollfd(fd: client.fd, events: Int16(client.answer == nil ? POLLIN : POLLOUT), revents: 0))
            }
            let timeout: Int32
            if let first = clients.map(\.deadline).min() {
                let now = BandwidthBucket.monotonicNanoseconds()
                timeout = first <= now ? 0 : Int32(clamping: (first - now + 999_999) / 1_000_000)
            } else {
                timeout = -1  // idle: sleep until a connection or the stop
            }
            if poll(&fds, nfds_t(fds.count), timeout) < 0 && errno != EINTR { usleep(100_000) }
            if stopped.load(ordering: .relaxed) { break }
            // Served before new ones are accepted: a closed slot is free for them.
            var open: [Client] = []
            let now = BandwidthBucket.monotonicNanoseconds()
            for (index, client) in clients.enumerated() {
                let events = fds[index + 2].revents
                let done = events != 0 ? step(client, &buffer) : false
                if done || now >= client.deadline {
                    close(client.fd)
                } else {
                    open.append(client)
                }
            }
            clients = open
            if fds[1].revents != 0 { accept(into: &clients, now: now) }
        }
        for client in clients { close(client.fd) }
        close(fd)
        close(wake)
    }

    /// Accepts every connection waiting; past `maxConnections`, the oldest open one is closed
    /// for each new one, so connections that never finish their request cannot keep a scrape out.
    private func accept(into clients: inout [Client], now: UInt64) {
        while true {
            let client = fetchd_accept(fd)
            if client < 0 {
                if errno == EINTR || errno == ECONNABORTED { continue }
                if errno != EAGAIN && errno != EWOULDBLOCK { usleep(100_000) }  // out of descriptors: not a spin
                return
            }
            if clients.count >= Self.maxConnections {
                close(clients.removeFirst().fd)
                log.debug("metrics: more than \(Self.maxConnections) connections; the oldest closed")
            }
            clients.append(Client(fd: client, deadline: now + Self.deadlineNanoseconds))
        }
    }

    /// Reads or writes what the connection is ready for; true when it is finished (answered,
    /// closed by the peer, or failed).
    private func step(_ client: Client, _ buffer: inout [UInt8]) -> Bool {
        if let answer = client.answer {
            let n = answer.withUnsafeBytes { send(client.fd, $0.baseAddress! + client.sent, $0.count - client.sent, Int32(MSG_NOSIGNAL)) }
            if n < 0 { return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR }
            client.sent += n
            return client.sent >= answer.count
        }
        let n = buffer.withUnsafeMutableBytes { recv(client.fd, $0.baseAddress, $0.count, 0) }
        if n < 0 { return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR }
        if n == 0 { return true }
        client.request += buffer[0..<n]
        if Self.headersEnded(client.request) || client.request.count >= Self.maxRequestBytes {
            client.answer = answer(to: client.request)
            return step(client, &buffer)
        }
        return false
    }

    private func answer(to request: [UInt8]) -> [UInt8] {
        let line = String(decoding: request.prefix { $0 != 13 && $0 != 10 }, as: UTF8.self).split(separator: " ")
        let status: String
        var body = ""
        var type = "text/plain; charset=utf-8"
        if line.count < 2 || !Self.headersEnded(request) {
            status = "400 Bad Request"
        } else if line[0] != "GET" && line[0] != "HEAD" {
            status = "405 Method Not Allowed"
        } else if line[1] != "/metrics" && !line[1].hasPrefix("/metrics?") {
            status = "404 Not Found"
            body = "fetchd serves its metrics at /metrics\n"
        } else {
            status = "200 OK"
            body = render()
            type = "text/plain; version=0.0.4; charset=utf-8"
        }
        let head = "HTTP/1.1 \(status)\r\nContent-Type: \(type)\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n"
        var out = Array(head.utf8)
        if line.first != "HEAD" { out += body.utf8 }
        return out
    }

    private static func headersEnded(_ bytes: [UInt8]) -> Bool {
        guard bytes.count >= 4 else { return false }
        for index in 3..<bytes.count where bytes[index] == 10 && bytes[index - 1] == 13 && bytes[index - 2] == 10 && bytes[index - 3] == 13 {
            return true
        }
        return false
    }
}
