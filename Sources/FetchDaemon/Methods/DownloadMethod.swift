import FetchEngine
import FoundationEssentials
import Glibc
import JSONRPC

/// `download`: the body streams to `<path>.part` and lands at `path` only when complete
/// (and verified, with `sha256`). A part file left by a failed or cancelled attempt is
/// continued with Range + If-Range.
struct DownloadMethod: DurableJobMethod {
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
        /// Survives a daemon restart (Durable jobs); implies detach.
        var durable = false

        init(_ params: JSONValue?, policy: FilePolicy) throws {
            var reader = try ParamReader(params)
            model = try RequestModel(reading: &reader, allowsBody: true, policy: policy)
            path = try reader.requiredString("path")
            try policy.checkWritable(path, field: reader.field("path"))
            if let overwrite = try reader.bool("overwrite") { self.overwrite = overwrite }
            let resume = try reader.bool("resume")
            if let resume { self.resume = resume }
            // A byte range is not the whole file: no part file is continued with its own Range.
            if model.routing.range != nil {
                if resume == true {
                    throw RPCError.invalidParams(field: reader.field("resume"), "a download with range starts from zero: resume must be false or left out")
                }
                self.resume = false
            }
            if let fsync = try reader.bool("fsync") { self.fsync = fsync }
            if let durable = try reader.bool("durable") { self.durable = durable }
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

    let driver: JobDriver
    let policy: FilePolicy

    func spec(_ raw: JSONValue?, resuming: DurableStore.Record?) throws -> JobSpec {
        var params = try Params(raw, policy: policy)
        let durableRecord = params.durable ? try driver.durableRecord(Self.name, raw, model: &params.model, resuming: resuming) : nil
        let part = PartFile(finalPath: params.path)
        try checkDestination(params)
        let partStage = PartFileStage(part: part, resume: params.resume, durable: params.fsync, errorBodyLimit: Self.errorBodyLimit)
        return JobSpec(
            kind: .download, model: params.model, request: params.model.httpRequest(maxBodyBytes: Self.errorBodyLimit),
            stages: Pipeline.stages(driver.services, adding: [partStage]), preparesOnWorker: true, durableRecord: durableRecord,
            answer: JobSpec.Answer(blocking: true) { [params] job, response in try Self.finish(job, response, part: part, params: params) })
    }

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

    /// On the blocking threads: the digest is awaited and the file lands.
    private static func finish(_ job: Job, _ response: HTTPResponse, part: PartFile, params: Params) throws -> JSONValue {
        var result = ResponseFields.common(job: job, response: response)
        result["path"] = .string(params.path)
        guard let outcome = response.download, outcome.wroteFile else {
            // Not 2xx: nothing is written at path; the answer's start is in the result.
            part.removeIfEmpty()
            result["bytes"] = 0
            result["sha256"] = .null
            result["resumed"] = false
            ResponseBody.add(response.body, mode: .auto, to: &result)
            return .object(result)
        }
        if let expected = params.sha256, expected != outcome.sha256 {
            part.remove()
            throw TransferFileError(path: params.path, detail: "sha256 mismatch: expected \(expected), got \(outcome.sha256); nothing was kept")
        }
        try part.land(overwrite: params.overwrite, durable: params.fsync)
        job.noteLanded(LandedFile(path: params.path, bytes: outcome.fileBytes))
        result["bytes"] = .integer(outcome.fileBytes)
        result["sha256"] = .string(outcome.sha256)
        result["resumed"] = .bool(outcome.resumed)
        return .object(result)
    }
}
