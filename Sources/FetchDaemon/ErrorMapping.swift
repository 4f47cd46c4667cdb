import FetchEngine
import JSONRPC

/// The one place where the daemon's and the engine's errors become JSON-RPC errors.
enum ErrorMapping {
    static func rpcError(for error: any Error) -> RPCError {
        switch error {
        case let error as RPCError:
            return error
        case let failed as JobFailed where failed.error.filePath != nil:
            return RPCError(.fileError, "File error: \(failed.error.detail)", data: [
                "path": .string(failed.error.filePath ?? ""), "detail": .string(failed.error.detail),
            ])
        case let failed as JobFailed:
            return RPCError(.transportFailure, "Transfer failed: \(failed.error.detail)", data: [
                "jobId": .string(failed.jobID), "kind": .string(failed.error.kind.rawValue),
                "detail": .string(failed.error.detail), "attempts": JSONValue(failed.attempts),
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
        default:
            return RPCError(.internalError, "Internal error", data: ["detail": .string(String(describing: error))])
        }
    }
}
