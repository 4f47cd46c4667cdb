/// A reason the daemon cannot start, said in one line.
public struct StartupError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
