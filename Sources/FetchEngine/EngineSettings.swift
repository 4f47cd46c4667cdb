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

    public init(caFile: String? = nil, userAgent: String = "fetchd", receiveBufferBytes: Int = 512 << 10,
                maxCachedConnections: Int = 256, handlePoolSize: Int = 64, spinMicroseconds: Int = 40) {
        self.caFile = caFile
        self.userAgent = userAgent
        self.receiveBufferBytes = receiveBufferBytes
        self.maxCachedConnections = maxCachedConnections
        self.handlePoolSize = handlePoolSize
        self.spinMicroseconds = spinMicroseconds
    }
}
