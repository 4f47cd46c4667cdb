internal import CCurl

/// Why a transfer produced no response. HTTP statuses are never errors.
public struct TransferError: Error, Sendable, Equatable {
    public enum Kind: String, Sendable, CaseIterable {
        case dns, connect, tls, timeout, reset, `protocol`, tooManyRedirects, bodyTooLarge, other
        /// The proxy could not be resolved, or refused or failed the tunnel.
        case proxy
        case cancelled
        /// No stub of the set the request named matched it (the daemon's stubs; never libcurl).
        case stubMiss
        /// A streamed body's destination could not take the bytes (a client's descriptor:
        /// its reader gone, EPIPE, or another write error).
        case write
        /// A request body read as it comes failed, or ended before its stated length.
        case read
    }

    public let kind: Kind
    public let detail: String
    /// Set when a local file failed (a download could not be written), not the network.
    public let filePath: String?
    /// The hops made before the failure, when the request asked to record them.
    public var exchange: [ExchangeHop] = []
    /// libcurl's phase times up to the failure.
    public var timings = TransferTimings()
    /// libcurl's CURLcode, when libcurl reported the failure.
    public var curlCode: Int?

    public init(_ kind: Kind, _ detail: String, filePath: String? = nil) {
        self.kind = kind
        self.detail = detail
        self.filePath = filePath
    }

    /// `proxy`: the request's proxy URL, if it named one.
    static func from(code: CURLcode, detail: String, proxy: String? = nil) -> TransferError {
        let text = detail.isEmpty ? String(cString: curl_easy_strerror(code)) : detail
        let kind = proxyNameUnresolved(code: code, detail: text, proxy: proxy) ? .proxy : kind(of: code)
        var error = TransferError(kind, text)
        error.curlCode = Int(code.rawValue)
        return error
    }

    /// libcurl reports a SOCKS proxy whose name does not resolve as CURLE_COULDNT_RESOLVE_HOST
    /// naming the proxy ("Could not resolve host: <proxy>"), not as CURLE_COULDNT_RESOLVE_PROXY
    /// as for an HTTP proxy: it is the proxy that failed, not the URL's host.
    static func proxyNameUnresolved(code: CURLcode, detail: String, proxy: String?) -> Bool {
        guard code == CURLE_COULDNT_RESOLVE_HOST, let proxy, let host = hostName(ofProxy: proxy) else { return false }
        return detail.hasSuffix(": \(host)") || detail.contains("'\(host)'")
    }

    /// The host name of a proxy URL (`socks5://user:pass@name:1080`), nil when it has none.
    static func hostName(ofProxy proxy: String) -> String? {
        var rest = Substring(proxy)
        if let scheme = rest.firstRange(of: "://") { rest = rest[scheme.upperBound...] }
        rest = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        if let at = rest.lastIndex(of: "@") { rest = rest[rest.index(after: at)...] }
        if rest.hasPrefix("[") { return nil }  // an IPv6 address: nothing to resolve
        let host = rest.prefix { $0 != ":" }
        return host.isEmpty ? nil : String(host)
    }

    /// A response whose headers went past a limit (`HTTPLimits`): ours, counted in the
    /// header callback, or libcurl's for one line, which it reports as CURLE_OUT_OF_MEMORY
    /// between a status line and the end of its headers.
    static func headersTooLarge(code: CURLcode, _ transfer: Transfer) -> TransferError? {
        if code == CURLE_WRITE_ERROR && transfer.responseHeadersTooLarge {
            return TransferError(.protocol, "the response headers are larger than \(HTTPLimits.responseHeaderBytes) bytes in all (fetchd's limit, over every redirect)")
        }
        if code == CURLE_OUT_OF_MEMORY && transfer.readingHeaders {
            return TransferError(.protocol, "a response header line is longer than \(HTTPLimits.responseHeaderLineBytes) bytes (libcurl's CURL_MAX_HTTP_HEADER)")
        }
        return nil
    }

    static func kind(of code: CURLcode) -> Kind {
        switch code {
        case CURLE_COULDNT_RESOLVE_HOST: .dns
        case CURLE_COULDNT_RESOLVE_PROXY, CURLE_PROXY: .proxy
        case CURLE_COULDNT_CONNECT: .connect
        case CURLE_OPERATION_TIMEDOUT: .timeout
        case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM,
            CURLE_SSL_CIPHER, CURLE_SSL_CACERT_BADFILE, CURLE_SSL_ISSUER_ERROR,
            CURLE_SSL_PINNEDPUBKEYNOTMATCH, CURLE_SSL_INVALIDCERTSTATUS, CURLE_SSL_CRL_BADFILE,
            CURLE_SSL_ENGINE_INITFAILED, CURLE_SSL_ENGINE_NOTFOUND, CURLE_SSL_ENGINE_SETFAILED,
            CURLE_SSL_SHUTDOWN_FAILED, CURLE_USE_SSL_FAILED:
            .tls
        // The connection broke: reset, or closed before any answer.
        case CURLE_GOT_NOTHING, CURLE_RECV_ERROR, CURLE_SEND_ERROR: .reset
        case CURLE_TOO_MANY_REDIRECTS: .tooManyRedirects
        // CURLE_PARTIAL_FILE: the server closed cleanly before the length it announced.
        case CURLE_WEIRD_SERVER_REPLY, CURLE_PARTIAL_FILE, CURLE_HTTP2, CURLE_HTTP2_STREAM, CURLE_BAD_CONTENT_ENCODING,
            CURLE_UNSUPPORTED_PROTOCOL, CURLE_HTTP3, CURLE_URL_MALFORMAT:
            .protocol
        case CURLE_ABORTED_BY_CALLBACK: .cancelled
        default: .other
        }
    }
}
