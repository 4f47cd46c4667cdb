import Glibc

/// Engine-wide settings, fixed when the engine starts.
public struct EngineSettings: Sendable {
    /// Extra CA bundle for TLS (in place of the system store).
    public var caFile: String?
    public var userAgent: String
    /// libcurl's receive buffer per transfer; large buffers make big downloads fast.
    public var receiveBufferBytes: Int
    /// Idle connections kept for reuse across all hosts.
    public var maxCachedConnections: Int
    /// Easy handles kept for reuse (saves setting up a handle per request).
    public var handlePoolSize: Int
    /// How long the engine thread keeps polling without sleeping before it blocks, in
    /// microseconds (0: never). Work that arrives within it skips a sleep and a wake-up.
    public var spinMicroseconds: Int
    /// Whether the daemon's environment names a proxy (or proxy exceptions) for libcurl to
    /// read. When it names none, requests without a `proxy` tell libcurl so, and it no longer
    /// looks the variables up in the environment for every request.
    public var proxyFromEnvironment: Bool
    /// Threads that run the requests with bodies in memory, each with its own multi handle
    /// (and its share of the socket's connections); downloads and file uploads have one more.
    public var smallRequestThreads: Int

    public init(caFile: String? = nil, userAgent: String = "fetchd", receiveBufferBytes: Int = 512 << 10,
                maxCachedConnections: Int = 256, handlePoolSize: Int = 64, spinMicroseconds: Int = 40,
                proxyFromEnvironment: Bool = EngineSettings.environmentNamesProxy(),
                smallRequestThreads: Int = EngineSettings.defaultSmallRequestThreads) {
        self.caFile = caFile
        self.userAgent = userAgent
        self.receiveBufferBytes = receiveBufferBytes
        self.maxCachedConnections = maxCachedConnections
        self.handlePoolSize = handlePoolSize
        self.spinMicroseconds = spinMicroseconds
        self.proxyFromEnvironment = proxyFromEnvironment
        self.smallRequestThreads = smallRequestThreads
    }

    /// Two on a machine with two or more cores, else one.
    public static var defaultSmallRequestThreads: Int {
        sysconf(Int32(_SC_NPROCESSORS_ONLN)) >= 2 ? 2 : 1
    }

    /// The variables libcurl reads for a proxy and its exceptions (either case).
    static let proxyVariables = ["http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY",
                                 "no_proxy", "NO_PROXY"]

    /// Whether any of `proxyVariables` is set in this process's environment, even empty.
    public static func environmentNamesProxy() -> Bool {
        proxyVariables.contains { getenv($0) != nil }
    }
}
