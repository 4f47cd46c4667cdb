internal import CCurl
import FoundationEssentials
import Glibc

/// One request and its answer as they crossed the wire: a redirect makes several. Kept
/// only when the request asks (`HTTPRequest.recordsExchange`), for HTTP logs.
public struct ExchangeHop: Sendable, Equatable {
    public var url: String
    public var method: String
    public var requestHeaders: [HTTPHeader] = []
    public var httpVersion = ""
    /// 0 when no answer came.
    public var status = 0
    public var statusText = ""
    public var responseHeaders: [HTTPHeader] = []

    public init(url: String, method: String) {
        self.url = url
        self.method = method
    }
}

/// Collects hops on the engine thread from libcurl's debug callback (request headers as
/// sent) and header callback (each answer's status line and headers).
final class ExchangeRecorder {
    private(set) var hops: [ExchangeHop] = []

    /// The request header block, as libcurl sent it, for the hop now starting.
    func requestSent(_ block: String, url: String) {
        HTTPEngine.assertOnAnEngineThread()
        var lines = block.split(separator: "\r\n", omittingEmptySubsequences: true).map(String.init)
        guard !lines.isEmpty else { return }
        let requestLine = lines.removeFirst().split(separator: " ")
        var hop = ExchangeHop(url: url, method: requestLine.first.map(String.init) ?? "")
        hop.httpVersion = requestLine.last.map(String.init) ?? ""
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { continue }
            hop.requestHeaders.append(HTTPHeader(String(line[..<colon]),
                                                 line[line.index(after: colon)...].trimmingBlanks()))
        }
        hops.append(hop)
    }

    /// A status line: interim 1xx answers are not hops of their own.
    func statusReceived(_ line: String) {
        HTTPEngine.assertOnAnEngineThread()
        guard !hops.isEmpty else { return }
        let parts = line.split(separator: " ", maxSplits: 2).map(String.init)
        let status = parts.count > 1 ? Int(parts[1]) ?? 0 : 0
        hops[hops.count - 1].httpVersion = parts.first ?? ""
        hops[hops.count - 1].status = status
        hops[hops.count - 1].statusText = parts.count > 2 ? parts[2] : ""
        hops[hops.count - 1].responseHeaders.removeAll()
    }

    func headerReceived(_ header: HTTPHeader) {
        guard !hops.isEmpty else { return }
        hops[hops.count - 1].responseHeaders.append(header)
    }
}

/// libcurl's debug callback: only the request headers going out are kept.
let transferDebugCallback: fetchd_debug_cb = { easy, type, data, size, user in
    guard type == CURLINFO_HEADER_OUT, let data, let user, let easy else { return 0 }
    let t = Unmanaged<Transfer>.fromOpaque(user).takeUnretainedValue()
    let block = String(decoding: UnsafeRawBufferPointer(start: data, count: size), as: UTF8.self)
    var url: UnsafeMutablePointer<CChar>? = nil
    fetchd_easy_getinfo_str(easy, CURLINFO_EFFECTIVE_URL, &url)
    t.recorder?.requestSent(block, url: url.map { String(cString: $0) } ?? t.request.url)
    return 0
}
