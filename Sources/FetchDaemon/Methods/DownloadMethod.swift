import FetchEngine
import FoundationEssentials
import Glibc
import JSONRPC

/// `download`: the body streams to `<path>.part` and lands at `path` only when complete
/// (and verified, with `sha256`). A part file left by a failed or cancelled attempt is
/// continued with Range + If-Range.
struct DownloadMethod: RPCMethod {
    static let name = "download"

    struct Params {
        var model: RequestModel
        var path: String
        var overwrite = false
        var resume = true
        var sha256: String?
        /// fsync the file before it takes its final name, so that even a power loss never
        /// leaves a partial file there. `false` trades that for speed, as curl -o does.
        var fsync = true

        init(_ params: JSONValue?, policy: FilePolicy) throws {
            var reader = try ParamReader(params)
            model = try RequestModel(reading: &reader, allowsBody: true, policy: policy)
            path = try reader.requiredString("path")
            try policy.checkWritable(path, field: reader.field("path"))
            if let overwrite = try reader.bool("overwrite") { self.overwrite = overwrite }
            if let resume = try reader.bool("resume") { self.resume = resume }
            if let fsync = try reader.bool("fsync") { self.fsync = fsync }
            if let digest = try reader.string("sha256") {
                let lower = digest.lowercased()
                guard lower.utf8.count == 64, lower.utf8.allSatisfy({ ($0 >= 48 && $0 <= 57) || ($0 >= 97 && $0 <= 102) }) else {
                    throw RPCError.invalidParams(field: reader.field("sha256"), "expected 64 hex digits")
                }
                sha256 = lower
            }
            try reader.finish()
        }
    }

    /// An answer outside 200-299 keeps this much of its body in the result.
    static let errorBodyLimit = 64 << 10

    let runner: JobRunner
    let policy: FilePolicy

    func call(_ params: JSONValue?, context: RPCContext) async throws -> JSONValue {
        let params = try Params(params, policy: policy)
        let part = PartFile(finalPath: params.path)
        try checkDestination(params)
        let startedAt = ContinuousClock.now
        let base = params.model.httpRequest(maxBodyBytes: Self.errorBodyLimit)
        var resume = params.resume
        while true {
            do {
                let resuming = resume
                return try await runner.run(
                    params.model, method: base.method, url: base.url, context: context,
                    prepare: { try await BlockingIO.run { try request(continuing: part, from: base, resume: resuming, durable: params.fsync) } },
                    body: { job, response in
                        // 416 to a range we asked for: the part file already holds the whole
                        // answer (or more). Start over rather than stay stuck on it.
                        if response.status == 416 && resuming && (part.size ?? 0) > 0 { throw RangeNotSatisfiable() }
                        return try await finish(job, response, part: part, params: params, startedAt: startedAt)
                    })
            } catch is RangeNotSatisfiable {
                part.remove()
                resume = false
            } catch {
                part.removeIfEmpty()
                throw error
            }
        }
    }

    private struct RangeNotSatisfiable: Error {}

    /// Refused before any request: an existing file without `overwrite`, or no directory.
    private func checkDestination(_ params: Params) throws {
        var info = stat()
        // lstat: a link (even a dangling one) under the final name counts as a file there.
        if lstat(params.path, &info) == 0 {
            guard params.overwrite else {
                throw TransferFileError(path: params.path, detail: "already exists (set overwrite to replace it)")
            }
            // A link is replaced by the download (rename never follows it), never written through.
            guard (info.st_mode & S_IFMT) == S_IFREG || (info.st_mode & S_IFMT) == S_IFLNK else {
                throw TransferFileError(path: params.path, detail: "exists and is not a regular file")
            }
        }
        let directory = PathText.directory(of: params.path)
        guard stat(directory, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR else {
            throw TransferFileError(path: params.path, detail: "the directory \(directory) does not exist")
        }
    }

    /// The request for the next attempt: from zero, or continuing the part file when it
    /// has bytes and the validator of the answer they came from.
    private func request(continuing part: PartFile, from base: HTTPRequest, resume: Bool, durable: Bool) throws -> HTTPRequest {
        var request = base
        var offset: Int64 = 0
        var hash = SHA256()
        if resume, let size = part.size, size > 0, let validator = part.validator {
            hash = try part.hash(upTo: size)
            offset = size
            request.headers.append(HTTPHeader("Range", "bytes=\(size)-"))
            request.headers.append(HTTPHeader("If-Range", validator))
        }
        request.destination = .file(DownloadTarget(
            partPath: part.path, resumeOffset: offset, hashOfExistingBytes: hash, errorBodyLimit: Self.errorBodyLimit,
            writesBackEarly: durable))
        return request
    }

    private func finish(_ job: Job, _ response: HTTPResponse, part: PartFile, params: Params,
                        startedAt: ContinuousClock.Instant) async throws -> JSONValue {
        var result = ResponseFields.common(job: job, response: response, startedAt: startedAt)
        result["path"] = .string(params.path)
        guard let outcome = response.download, outcome.wroteFile else {
            // Not 2xx: nothing is written at path; the answer's start is in the result.
            part.removeIfEmpty()
            result["bytes"] = 0
            result["sha256"] = .null
            result["resumed"] = false
            FetchMethod.addBody(response.body, mode: .auto, to: &result)
            return .object(result)
        }
        if let expected = params.sha256, expected != outcome.sha256 {
            part.remove()
            throw TransferFileError(path: params.path, detail: "sha256 mismatch: expected \(expected), got \(outcome.sha256); nothing was kept")
        }
        let overwrite = params.overwrite, durable = params.fsync
        try await BlockingIO.run { try part.land(overwrite: overwrite, durable: durable) }
        result["bytes"] = .integer(outcome.fileBytes)
        result["sha256"] = .string(outcome.sha256)
        result["resumed"] = .bool(outcome.resumed)
        return .object(result)
    }
}
