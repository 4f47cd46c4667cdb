/// A JSON-RPC error object. The standard codes and fetchd's own are named here, once.
public struct RPCError: Error, Sendable, Equatable {
    public struct Code: RawRepresentable, Sendable, Equatable, Hashable {
        public let rawValue: Int
        public init(rawValue: Int) { self.rawValue = rawValue }

        public static let parseError = Code(rawValue: -32700)
        public static let invalidRequest = Code(rawValue: -32600)
        public static let methodNotFound = Code(rawValue: -32601)
        public static let invalidParams = Code(rawValue: -32602)
        public static let internalError = Code(rawValue: -32603)
        // fetchd's own range, -32001 ... -32099 (the "server error" range of the spec).
        public static let transportFailure = Code(rawValue: -32001)
        public static let cancelled = Code(rawValue: -32002)
        public static let fileError = Code(rawValue: -32003)
        public static let notAllowed = Code(rawValue: -32004)
        public static let overloaded = Code(rawValue: -32005)
        public static let messageTooLarge = Code(rawValue: -32006)
    }

    public let code: Code
    public let message: String
    public let data: JSONValue?

    public init(_ code: Code, _ message: String, data: JSONValue? = nil) {
        self.code = code
        self.message = message
        self.data = data
    }

    public var json: JSONValue {
        var object: JSONObject = ["code": .integer(Int64(code.rawValue)), "message": .string(message)]
        if let data { object["data"] = data }
        return .object(object)
    }

    public static func parseError(_ detail: String) -> RPCError {
        RPCError(.parseError, "Parse error", data: ["detail": .string(detail)])
    }

    public static func invalidRequest(_ detail: String) -> RPCError {
        RPCError(.invalidRequest, "Invalid Request", data: ["detail": .string(detail)])
    }

    public static func methodNotFound(_ method: String) -> RPCError {
        RPCError(.methodNotFound, "Method not found", data: ["method": .string(method)])
    }

    /// -32602 with the JSON path of the offending parameter.
    public static func invalidParams(field: String, _ detail: String) -> RPCError {
        RPCError(.invalidParams, "Invalid params", data: ["field": .string(field), "detail": .string(detail)])
    }

    /// -32602 for a value past a size limit, with the limit in `data.limit`.
    public static func invalidParams(field: String, _ detail: String, limit: Int) -> RPCError {
        RPCError(.invalidParams, "Invalid params", data: [
            "field": .string(field), "detail": .string(detail), "limit": .integer(Int64(limit)),
        ])
    }

    public static func messageTooLarge(limit: Int) -> RPCError {
        RPCError(.messageTooLarge, "Message too large", data: ["limit": .integer(Int64(limit))])
    }

    /// A message dropped because every client's unfinished messages together passed `limit`.
    public static func unfinishedMessagesTooLarge(limit: Int) -> RPCError {
        RPCError(.messageTooLarge, "Message too large", data: [
            "limit": .integer(Int64(limit)),
            "detail": .string("the daemon holds too many unfinished messages across all connections (\(limit) bytes); send it again"),
        ])
    }
}
