/// A request or notification after validation (JSON-RPC 2.0 section 4).
public struct RPCRequest: Sendable {
    /// nil for a notification; otherwise a string, number or null, echoed exactly.
    public let id: JSONValue?
    public let method: String
    public let params: JSONValue?

    public var isNotification: Bool { id == nil }

    public init(id: JSONValue?, method: String, params: JSONValue?) {
        self.id = id
        self.method = method
        self.params = params
    }

    /// Validates one request object. On failure returns the error together with the id to
    /// answer with (null when the id itself is unusable).
    public static func validate(_ value: JSONValue) -> Result<RPCRequest, AnswerableError> {
        guard case .object(let object) = value else {
            return .failure(AnswerableError(id: .null, error: .invalidRequest("a request must be an object")))
        }
        // One pass over the members (this runs for every request); the checks below keep
        // their order so the error reported for a request with several faults is stable.
        var rawID: JSONValue? = nil
        var version: JSONValue? = nil
        var rawMethod: JSONValue? = nil
        var params: JSONValue? = nil
        var unknown: String? = nil
        for member in object.members {
            switch member.key {
            case "method": rawMethod = member.value
            case "params": params = member.value
            case "id": rawID = member.value
            case "jsonrpc": version = member.value
            default: if unknown == nil { unknown = member.key }
            }
        }
        var id: JSONValue? = nil
        if let rawID {
            switch rawID {
            case .string, .integer, .double, .null: id = rawID
            default:
                return .failure(AnswerableError(id: .null, error: .invalidRequest("id must be a string, number or null")))
            }
        }
        let answerID = id ?? .null
        guard version == .string("2.0") else {
            return .failure(AnswerableError(id: answerID, error: .invalidRequest("jsonrpc must be \"2.0\"")))
        }
        guard case .string(let method)? = rawMethod else {
            return .failure(AnswerableError(id: answerID, error: .invalidRequest("method must be a string")))
        }
        switch params {
        case nil, .object?, .array?: break
        default:
            return .failure(AnswerableError(id: answerID, error: .invalidRequest("params must be an object or an array")))
        }
        if let unknown {
            return .failure(AnswerableError(id: answerID, error: .invalidRequest("unknown member \"\(unknown)\"")))
        }
        return .success(RPCRequest(id: id, method: method, params: params))
    }
}

public struct AnswerableError: Error, Sendable {
    public let id: JSONValue
    public let error: RPCError
}

/// Builders for the two answer shapes and for server-to-client notifications.
public enum RPCMessage {
    public static func result(id: JSONValue, _ result: JSONValue) -> JSONValue {
        .object(["jsonrpc": "2.0", "id": id, "result": result])
    }

    public static func error(id: JSONValue, _ error: RPCError) -> JSONValue {
        .object(["jsonrpc": "2.0", "id": id, "error": error.json])
    }

    public static func notification(method: String, params: JSONValue) -> JSONValue {
        .object(["jsonrpc": "2.0", "method": .string(method), "params": params])
    }

    /// One line on the wire: compact JSON and a newline.
    public static func line(_ message: JSONValue) -> [UInt8] {
        JSONCodec.encodeLine(message)
    }
}
