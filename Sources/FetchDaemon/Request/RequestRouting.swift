import FetchEngine
import JSONRPC

/// The request model's TLS, routing and protocol fields (protocol version 2): `insecure`,
/// `caFile`, `certFile`/`keyFile`, `httpVersion`, `range`, `resolve`, `unixSocket`; the
/// bandwidth caps and the request's `cost` against its host's rate (version 3), which most
/// requests leave at their defaults too. Each is checked here, so a bad
/// value is -32602 naming its field before anything is sent.
struct RequestRouting: Sendable, Equatable {
    var insecure = false
    var caFile: String?
    var certFile: String?
    var keyFile: String?
    var httpVersion: HTTPVersionChoice?
    var range: String?
    /// `resolve` as libcurl's CURLOPT_CONNECT_TO entries ("host:port:address:port").
    var connectTo: [String] = []
    var unixSocket: String?
    var maxRecvBytesPerSecond: Int?
    var maxSendBytesPerSecond: Int?
    /// nil: the daemon's environment; "": none; else the proxy URL.
    var proxy: String?
    var noProxy: String?
    /// Units of the host's `requestsPerSecond` the request takes (nil: 1). Checked against
    /// the host's burst when the request is admitted (`HostLimitStage`).
    var cost: Double?

    init() {}

    init(reading params: inout ParamReader, policy: FilePolicy) throws {
        if let insecure = try params.bool("insecure") { self.insecure = insecure }
        if let path = try params.string("caFile") {
            try policy.checkReadable(path, field: params.field("caFile"))
            caFile = path
        }
        for name in ["certFile", "keyFile"] {
            guard let path = try params.string(name) else { continue }
            try policy.checkReadable(path, field: params.field(name))
            if name == "certFile" { certFile = path } else { keyFile = path }
        }
        if keyFile != nil && certFile == nil {
            throw RPCError.invalidParams(field: params.field("keyFile"), "a key needs its certificate: certFile")
        }
        if let version = try params.string("httpVersion") {
            guard let choice = HTTPVersionChoice(rawValue: version) else {
                throw RPCError.invalidParams(field: params.field("httpVersion"), "expected \"1.1\" or \"2\"")
            }
            httpVersion = choice
        }
        if let range = try params.string("range") {
            guard Self.isRange(range) else {
                throw RPCError.invalidParams(field: params.field("range"), "expected \"START-END\" or \"START-\" (bytes, START <= END)")
            }
            self.range = range
        }
        if let resolve = try params.object("resolve") {
            for (key, value) in resolve.members {
                let field = params.field("resolve") + "." + key
                guard case .string(let address) = value else {
                    throw RPCError.invalidParams(field: field, "expected an address string, got \(value.typeName)")
                }
                connectTo.append(try Self.connectTo(key, address, field: field))
            }
        }
        switch params.value("proxy") {
        case nil, .null?: break
        case .bool(false)?: proxy = ""
        case .string(let url)? where Self.proxySchemes.contains(where: { url.lowercased().hasPrefix($0) }) && !url.containsNUL
            && url.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7f }):
            proxy = url
        case let other?:
            throw RPCError.invalidParams(field: params.field("proxy"),
                                         "expected false or an http://, https://, socks5:// or socks5h:// URL, got \(other.typeName == "string" ? "another string" : other.typeName)")
        }
        if let noProxy = try params.string("noProxy") {
            guard noProxy.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7f }) else {
                throw RPCError.invalidParams(field: params.field("noProxy"), "expected host names separated by commas")
            }
            self.noProxy = noProxy
        }
        maxRecvBytesPerSecond = try params.integer("maxRecvBytesPerSecond", in: 1...(1 << 40))
        maxSendBytesPerSecond = try params.integer("maxSendBytesPerSecond", in: 1...(1 << 40))
        if let cost = try params.number("cost") {
            guard cost > 0, cost <= Self.maxCost else {
                throw RPCError.invalidParams(field: params.field("cost"), "expected a number > 0 and at most 1000000")
            }
            if cost != 1 { self.cost = cost }
        }
        if let path = try params.string("unixSocket") {
            try FilePolicy.checkPath(path, field: params.field("unixSocket"))
            guard path.utf8.count < 108 else {
                throw RPCError.invalidParams(field: params.field("unixSocket"), "longer than a socket address holds (107 bytes)")
            }
            unixSocket = path
        }
    }

    /// Sets the request's transport options at once (each change of one makes a new box).
    func apply(to request: inout HTTPRequest) {
        var options = request.transport
        options.insecure = insecure
        if let caFile { options.caFile = caFile }
        options.certFile = certFile
        options.keyFile = keyFile
        options.httpVersion = httpVersion
        options.range = range
        options.connectTo = connectTo
        options.unixSocket = unixSocket
        options.proxy = proxy
        options.noProxy = noProxy
        options.maxRecvBytesPerSecond = maxRecvBytesPerSecond
        options.maxSendBytesPerSecond = maxSendBytesPerSecond
        request.transport = options
    }

    static let proxySchemes = ["http://", "https://", "socks5://", "socks5h://"]
    /// The most a request may cost: the largest burst a limit has.
    static let maxCost = 1_000_000.0

    static func isRange(_ text: String) -> Bool {
        let parts = text.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2, let start = UInt64(parts[0]), parts[0].utf8.allSatisfy(isDigit) else { return false }
        if parts[1].isEmpty { return true }
        guard parts[1].utf8.allSatisfy(isDigit), let end = UInt64(parts[1]) else { return false }
        return start <= end
    }

    /// "host:port" -> "address" as curl's `--resolve host:port:address`: connect to that
    /// address (same port) whenever this request reaches host:port (redirects included).
    static func connectTo(_ key: String, _ address: String, field: String) throws(RPCError) -> String {
        guard let colon = key.utf8.lastIndex(of: UInt8(ascii: ":")),
              let port = Int(key[key.index(after: colon)...]), (1...65535).contains(port) else {
            throw RPCError.invalidParams(field: field, "expected \"host:port\"")
        }
        let host = String(key[..<colon])
        guard !host.isEmpty, host.utf8.allSatisfy(isHostByte) else {
            throw RPCError.invalidParams(field: field, "not a valid host name")
        }
        let bare = address.hasPrefix("[") && address.hasSuffix("]") ? String(address.dropFirst().dropLast()) : address
        guard !bare.isEmpty, bare.utf8.allSatisfy({ isHexOrDigit($0) || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: ":") }) else {
            throw RPCError.invalidParams(field: field, "expected an IPv4 or IPv6 address")
        }
        let target = bare.contains(":") ? "[\(bare)]" : bare
        return "\(host):\(port):\(target):\(port)"
    }

    private static func isDigit(_ byte: UInt8) -> Bool { byte &- UInt8(ascii: "0") < 10 }
    private static func isHexOrDigit(_ byte: UInt8) -> Bool {
        isDigit(byte) || (byte | 0x20) &- UInt8(ascii: "a") < 6
    }
    private static func isHostByte(_ byte: UInt8) -> Bool {
        isDigit(byte) || (byte | 0x20) &- UInt8(ascii: "a") < 26 || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".")
            || byte == UInt8(ascii: "[") || byte == UInt8(ascii: "]") || byte == UInt8(ascii: ":")
    }
}
