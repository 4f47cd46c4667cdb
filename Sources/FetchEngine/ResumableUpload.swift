/// Google's resumable upload protocol, as GTMSessionUploadFetcher speaks it, as a state
/// machine: it says which request to send next and reads each answer; a driver sends them.
///
///     start   POST url            X-Goog-Upload-Command: start -> X-Goog-Upload-URL
///     upload  PUT  upload URL     X-Goog-Upload-Command: upload[, finalize], X-Goog-Upload-Offset
///     query   PUT  upload URL     X-Goog-Upload-Command: query -> X-Goog-Upload-Size-Received
///     cancel  PUT  upload URL     X-Goog-Upload-Command: cancel
public struct ResumableUpload: Sendable, Equatable {
    public enum Step: Sendable, Equatable {
        case start
        case chunk(offset: Int64, length: Int64, finalize: Bool)
        case query
        /// The server has the whole file (or said the upload is over): this is the answer.
        case finished
    }

    public enum Problem: Error, Sendable, Equatable {
        /// The start was answered without an upload URL (the answer is the result).
        case notResumable
        /// An answer the protocol does not allow, such as an offset past the end.
        case protocolViolation(String)
    }

    public let fileSize: Int64
    public let chunkSize: Int64
    public let contentType: String
    public private(set) var uploadURL: String?
    /// Bytes the server has acknowledged.
    public private(set) var offset: Int64 = 0
    public private(set) var next: Step = .start

    public init(fileSize: Int64, chunkSize: Int64, contentType: String) {
        self.fileSize = fileSize
        self.chunkSize = max(1, chunkSize)
        self.contentType = contentType
    }

    // MARK: requests

    public func startHeaders() -> [HTTPHeader] {
        [
            HTTPHeader("X-Goog-Upload-Protocol", "resumable"),
            HTTPHeader("X-Goog-Upload-Command", "start"),
            HTTPHeader("X-Goog-Upload-Header-Content-Length", String(fileSize)),
            HTTPHeader("X-Goog-Upload-Header-Content-Type", contentType),
        ]
    }

    public func headers(for step: Step) -> [HTTPHeader] {
        var headers = [HTTPHeader("X-Goog-Upload-Protocol", "resumable")]
        switch step {
        case .start: return startHeaders()
        case .chunk(let offset, _, let finalize):
            headers.append(HTTPHeader("X-Goog-Upload-Command", finalize ? "upload, finalize" : "upload"))
            headers.append(HTTPHeader("X-Goog-Upload-Offset", String(offset)))
        case .query: headers.append(HTTPHeader("X-Goog-Upload-Command", "query"))
        case .finished: break
        }
        return headers
    }

    public func cancelHeaders() -> [HTTPHeader] {
        [HTTPHeader("X-Goog-Upload-Protocol", "resumable"), HTTPHeader("X-Goog-Upload-Command", "cancel")]
    }

    // MARK: answers

    /// Reads the answer to `start`.
    public mutating func started(status: Int, headers: [HTTPHeader]) throws(Problem) {
        guard (200...299).contains(status), let url = Self.header("X-Goog-Upload-URL", in: headers), !url.isEmpty else {
            throw .notResumable
        }
        uploadURL = url
        offset = 0
        next = nextChunk()
    }

    /// Reads the answer to a chunk or a query.
    public mutating func answered(status: Int, headers: [HTTPHeader]) throws(Problem) {
        let uploadStatus = Self.header("X-Goog-Upload-Status", in: headers)?.lowercased()
        if uploadStatus == "final" || uploadStatus == "cancelled" {
            next = .finished
            return
        }
        guard (200...299).contains(status) else {
            // A refused chunk (a wrong offset, say): ask the server where it stands.
            next = .query
            return
        }
        if let received = Self.header("X-Goog-Upload-Size-Received", in: headers).flatMap({ Int64($0) }) {
            guard received >= 0 && received <= fileSize else {
                throw .protocolViolation("X-Goog-Upload-Size-Received \(received) is outside 0...\(fileSize)")
            }
            offset = received
        } else if case .chunk(let sentOffset, let length, _) = next {
            offset = sentOffset + length
        }
        if case .chunk(_, _, true) = next {
            next = .finished
        } else {
            next = nextChunk()
        }
    }

    /// A session started before (by a daemon that was restarted): ask the server where it stands.
    public mutating func resume(uploadURL: String) {
        self.uploadURL = uploadURL
        next = .query
    }

    /// After a failure on the network: the server may have some of the chunk; ask it.
    public mutating func failed() {
        if uploadURL != nil { next = .query }
    }

    private func nextChunk() -> Step {
        let length = min(chunkSize, fileSize - offset)
        return .chunk(offset: offset, length: length, finalize: offset + length >= fileSize)
    }

    static func header(_ name: String, in headers: [HTTPHeader]) -> String? {
        headers.last { $0.name.caseInsensitiveEquals(name) }?.value
    }
}
