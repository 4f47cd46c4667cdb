import FetchEngine
import JSONRPC

/// The one place where the daemon's and the engine's errors become JSON-RPC errors.
enum ErrorMapping {
    /// The error as the client sees it, with the secrets of any URL in its message and
    /// details masked (`URLRedaction`): errors are logged and shown, unlike a result's URL.
    static func rpcError(for error: any Error) -> RPCError {
        let mapped = unredacted(error)
        guard case .object(var data)? = mapped.data else {
            return RPCError(mapped.code, URLRedaction.redactURLs(in: mapped.message), data: mapped.data)
        }
        for (key, value) in data.members where key != "path" {
            if case .string(let text) = value { data[key] = .string(URLRedaction.redactURLs(in: text)) }
        }
        return RPCError(mapped.code, URLRedaction.redactURLs(in: mapped.message), data: .object(data))
    }

    private static func unredacted(_ error: any Error) -> RPCError {
        switch error {
        case let error as RPCError:
            return error
        case let failed as JobFailed where failed.error.filePath != nil:
            return RPCError(.fileError, "File error: \(failed.error.detail)", data: [
                "path": .string(failed.error.filePath ?? ""), "detail": .string(failed.error.detail),
            ])
        case let failed as JobFailed where failed.error.curlCode == 1 && failed.error.detail.hasPrefix("Protocol \""):
            // The request's own URL is http or https (checked before it starts): libcurl's
            // `Protocol "x" not supported` is a redirect elsewhere (CURLOPT_REDIR_PROTOCOLS_STR).
            // (CURLE_UNSUPPORTED_PROTOCOL is also an HTTP/0.9 answer: that stays -32001.)
            return RPCError(.notAllowed, "Not allowed", data: [
                "detail": .string("a redirect to a scheme other than http or https is refused (\(failed.error.detail))"),
                "jobId": .string(failed.jobID), "attempts": JSONValue(failed.attempts),
            ])
        case let failed as JobFailed:
            // Every TransferError kind is one -32001 `kind`: the network's, and `write` (a
            // client's bodyTo descriptor could not take the bytes) and `read` (its bodyFrom
            // failed or ended early). A failure after a streamed body began carries
            // `streamed` (StreamCommit) in `failed.data`.
            var data: JSONObject = [
                "jobId": .string(failed.jobID), "kind": .string(failed.error.kind.rawValue),
                "detail": .string(failed.error.detail), "attempts": JSONValue(failed.attempts),
            ]
            if let code = failed.error.curlCode { data["curlCode"] = JSONValue(code) }
            for (key, value) in failed.data?.members ?? [] { data[key] = value }
            return RPCError(.transportFailure, "Transfer failed: \(failed.error.detail)", data: .object(data))
        case let failed as AuthFailed:
            return RPCError(.transportFailure, "Authentication failed: the rule for \(failed.rule): \(failed.reason)", data: [
                "jobId": .string(failed.jobID), "kind": "auth", "detail": .string(failed.reason),
                "attempts": JSONValue(failed.attempts), "rule": .string(failed.rule),
            ])
        case let cancelled as JobCancelled:
            return RPCError(.cancelled, "Cancelled", data: [
                // A request refused before it became a job has no id yet.
                "jobId": cancelled.jobID.isEmpty ? .null : .string(cancelled.jobID), "by": .string(cancelled.by.rawValue),
            ])
        case let file as TransferFileError:
            return RPCError(.fileError, "File error: \(file.detail)", data: [
                "path": .string(file.path), "detail": .string(file.detail),
            ])
        case let overloaded as HostScheduler.Overloaded:
            return RPCError(.overloaded, "Overloaded: too many requests waiting", data: ["limit": JSONValue(overloaded.limit)])
        case let refused as NotAllowed:
            return RPCError(.notAllowed, "Not allowed", data: ["detail": .string(refused.detail)])
        case CacheError.disabled:
            return RPCError(.notAllowed, "Not allowed", data: ["detail": "the daemon runs without an HTTP cache (start it with --cache-dir)"])
        case CacheError.store(let path, let detail):
            return RPCError(.fileError, "File error: \(detail)", data: ["path": .string(path), "detail": .string(detail)])
        case let duplicate as DuplicateJobID:
            return RPCError.invalidParams(field: "jobId", "a live job already has the id \"\(duplicate.jobID)\"")
        default:
            return RPCError(.internalError, "Internal error", data: ["detail": .string(String(describing: error))])
        }
    }
}
