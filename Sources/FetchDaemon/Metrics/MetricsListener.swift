import FetchEngine
import FoundationEssentials
import Glibc
internal import CLinux
import Synchronization

/// `--metrics-listen ADDR:PORT`: Prometheus' text at `GET /metrics` over plain HTTP/1.1, on a
/// thread of its own that sleeps in accept() (an idle daemon is not woken). One scrape at a
/// time, each given 5 s to send its request and read the answer; the connection is closed
/// after each answer. Other paths get 404, other methods 405.
final class MetricsListener: Sendable {
    let address: String
    private let fd: Int32
    private let render: @Sendable () -> String
    private let stopped = Atomic<Bool>(false)

    static let timeoutMilliseconds = 5_000
    static let maxRequestBytes = 8192

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
        self.fd = fd
        self.render = render
        address = listen.description
    }

    func start() {
        NamedThread.start("fetchd-metrics") { [self] in serve() }
    }

    func stop() {
        stopped.store(true, ordering: .relaxed)
        // Wakes the accept(): it fails, and the thread sees `stopped`.
        Glibc.shutdown(fd, Int32(SHUT_RDWR))
    }

    private func serve() {
        while !stopped.load(ordering: .relaxed) {
            let client = accept(fd, nil, nil)
            if client < 0 {
                if errno == EINTR || errno == ECONNABORTED { continue }
                if stopped.load(ordering: .relaxed) { break }
                usleep(100_000)  // out of descriptors: try again soon, do not spin
                continue
            }
            _ = fcntl(client, F_SETFD, FD_CLOEXEC)
            answer(client)
            close(client)
        }
        close(fd)
    }

    private func answer(_ client: Int32) {
        _ = fetchd_socket_timeouts(client, Self.timeoutMilliseconds)
        var request: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 2048)
        while request.count < Self.maxRequestBytes, !Self.headersEnded(request) {
            let n = buffer.withUnsafeMutableBytes { recv(client, $0.baseAddress, $0.count, 0) }
            if n <= 0 { return }
            request += buffer[0..<n]
        }
        let line = String(decoding: request.prefix { $0 != 13 && $0 != 10 }, as: UTF8.self).split(separator: " ")
        let status: String
        var body = ""
        var type = "text/plain; charset=utf-8"
        if line.count < 2 {
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
        var sent = 0
        while sent < out.count {
            let n = out.withUnsafeBytes { send(client, $0.baseAddress! + sent, $0.count - sent, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { return }
            sent += n
        }
    }

    private static func headersEnded(_ bytes: [UInt8]) -> Bool {
        guard bytes.count >= 4 else { return false }
        for index in 3..<bytes.count where bytes[index] == 10 && bytes[index - 1] == 13 && bytes[index - 2] == 10 && bytes[index - 3] == 13 {
            return true
        }
        return false
    }
}
