import FetchEngine
import FoundationEssentials
import Glibc
import JSONRPC

/// `upload`: multipart/form-data streamed from disk (files by path or inline, plus form
/// fields), or, with `resumable`, one file in Google's resumable upload protocol.
struct UploadMethod: DurableJobMethod {
    static let name = "upload"

    struct FileParam {
        enum Source { case path(String), bytes([UInt8]) }
        var source: Source
        var filename: String
        var mimetype: String
        var field: String
    }

    struct Params {
        var model: RequestModel
        var files: [FileParam] = []
        var fields: [(String, String)] = []
        var skipUnreadable = false
        var resumableChunkSize: Int64?
        var bodyMode = ResponseBody.Mode.auto
        var maxBodyBytes = 64 << 20
        /// Survives a daemon restart (Durable jobs): sent again from the start; implies detach.
        var durable = false

        init(_ params: JSONValue?, policy: FilePolicy) throws {
            var reader = try ParamReader(params)
            let methodGiven = reader.contains("method")
            model = try RequestModel(reading: &reader, allowsBody: false, policy: policy)
            if !methodGiven { model.method = "POST" }
            let list = try reader.array("files") ?? []
            for (index, value) in list.enumerated() {
                files.append(try Self.file(value, field: reader.field("files") + "[\(index)]", policy: policy))
            }
            if let fields = try reader.object("fields") {
                for (name, value) in fields.members {
                    let field = reader.field("fields") + "." + name
                    guard case .string(let text) = value else {
                        throw RPCError.invalidParams(field: field, "expected a string, got \(value.typeName)")
                    }
                    try HTTPSyntax.checkDispositionParameter(name, field: field)
                    self.fields.append((name, text))
                }
            }
            if let skip = try reader.bool("skipUnreadable") { skipUnreadable = skip }
            if let durable = try reader.bool("durable") { self.durable = durable }
            (bodyMode, maxBodyBytes) = try ResponseBody.readOptions(&reader)
            if var resumable = try reader.nested("resumable") {
                resumableChunkSize = Int64(try resumable.integer("chunkSize", in: 1...(1 << 40)) ?? 8 << 20)
                try resumable.finish()
                guard files.count == 1, case .path = files[0].source else {
                    throw RPCError.invalidParams(field: reader.field("files"), "a resumable upload sends exactly one file given by path")
                }
            }
            guard !files.isEmpty || !fields.isEmpty else {
                throw RPCError.invalidParams(field: reader.field("files"), "nothing to upload: give files or fields")
            }
            try reader.finish()
        }

        private static func file(_ value: JSONValue, field: String, policy: FilePolicy) throws -> FileParam {
            var reader = try ParamReader(value, path: field)
            let sources = ["path", "content", "contentBase64"].filter { reader.contains($0) }
            guard sources.count == 1 else {
                throw RPCError.invalidParams(field: field, "give exactly one of path, content, contentBase64")
            }
            let source: FileParam.Source
            var defaultName = "file"
            if let path = try reader.string("path") {
                try policy.checkReadable(path, field: reader.field("path"))
                source = .path(path)
                defaultName = PathText.lastComponent(of: path)
            } else if let text = try reader.string("content") {
                source = .bytes(Array(text.utf8))
            } else {
                let encoded = try reader.requiredString("contentBase64")
                guard let data = Data(base64Encoded: encoded) else {
                    throw RPCError.invalidParams(field: reader.field("contentBase64"), "not valid base64")
                }
                source = .bytes([UInt8](data))
            }
            // The name taken from the path is checked as one given would be (it is sent
            // the same way), and named by the path.
            let given = try reader.string("filename")
            let filename = given ?? defaultName
            try HTTPSyntax.checkDispositionParameter(filename, field: reader.field(given == nil ? "path" : "filename"))
            let mimetype: String
            if let type = try reader.string("mimetype") {
                try HTTPSyntax.checkMediaType(type, field: reader.field("mimetype"))
                mimetype = type
            } else {
                mimetype = MimeTypes.guess(forFilename: filename)
            }
            let formField = try reader.string("field") ?? "file"
            try HTTPSyntax.checkDispositionParameter(formField, field: reader.field("field"))
            try reader.finish()
            return FileParam(source: source, filename: filename, mimetype: mimetype, field: formField)
        }
    }

    let driver: JobDriver
    let policy: FilePolicy

    func spec(_ raw: JSONValue?, resuming: DurableStore.Record?) throws -> JobSpec {
        var params = try Params(raw, policy: policy)
        let durableRecord = params.durable ? try driver.durableRecord(Self.name, raw, model: &params.model, resuming: resuming) : nil
        let requested = params.files
        // Strict by default: an unreadable file stops the upload before anything is sent.
        var failedFiles: [String] = []
        var readable: [FileParam] = []
        for file in params.files {
            if case .path(let path) = file.source, let problem = Self.unreadable(path) {
                guard params.skipUnreadable else { throw TransferFileError(path: path, detail: problem) }
                failedFiles.append(file.filename)
                continue
            }
            readable.append(file)
        }
        params.files = readable
        let answer = JobSpec.Answer(blocking: false) { [params, failedFiles] job, response in
            Self.result(job, response, params: params, failedFiles: failedFiles)
        }
        var request = params.model.httpRequest(maxBodyBytes: params.maxBodyBytes)
        if let chunkSize = params.resumableChunkSize {
            guard let file = readable.first, case .path(let path) = file.source else {
                var unreadablePath = ""
                if case .path(let path)? = requested.first?.source { unreadablePath = path }
                throw TransferFileError(path: unreadablePath, detail: "the file to upload could not be read")
            }
            var info = stat()
            guard stat(path, &info) == 0 else { throw TransferFileError(path: path, detail: String(cString: strerror(errno))) }
            let jobs = driver.jobs
            var sessionStarted: (@Sendable (String) throws -> Void)? = nil
            if let durableRecord, let store = driver.services.durable {
                sessionStarted = { url in try store.saveSession(jobID: durableRecord.jobID, url: url) }
            }
            let session = ResumableUploadStage(
                path: path, fileSize: Int64(info.st_size), chunkSize: chunkSize, contentType: file.mimetype,
                engine: driver.services.engine, freshTransferID: { jobs.freshTransferID() },
                resuming: durableRecord?.sessionURL, sessionStarted: sessionStarted)
            request.body = .none
            // Retry is on by default for a resumable upload, even with POST: surviving
            // failures is the point.
            var policy = params.model.retryPolicy
            policy.enabled = params.model.retry.enabled ?? true
            return JobSpec(kind: .upload, model: params.model, request: request,
                           stages: Pipeline.stages(driver.services, adding: [session]), retryPolicy: policy,
                           preparesOnWorker: true, durableRecord: durableRecord, answer: answer)
        }
        request.body = .multipart(Self.form(params))
        return JobSpec(kind: .upload, model: params.model, request: request, stages: Pipeline.stages(driver.services),
                       durableRecord: durableRecord, answer: answer)
    }

    static func result(_ job: Job, _ response: HTTPResponse, params: Params, failedFiles: [String]) -> JSONValue {
        var result = ResponseFields.common(job: job, response: response)
        result["bytes"] = JSONValue(response.body.count)
        ResponseBody.add(response.body, mode: params.bodyMode, to: &result)
        result["sentBytes"] = .integer(response.sentBytes)
        result["failedFiles"] = .array(failedFiles.map(JSONValue.string))
        return .object(result)
    }

    /// Form fields first, then the files, in the order given.
    static func form(_ params: Params) -> MultipartForm {
        var parts = params.fields.map { MultipartForm.Part(name: $0.0, source: .bytes(Array($0.1.utf8))) }
        for file in params.files {
            let source: MultipartForm.Part.Source
            switch file.source {
            case .path(let path): source = .file(path: path)
            case .bytes(let bytes): source = .bytes(bytes)
            }
            parts.append(MultipartForm.Part(name: file.field, filename: file.filename, contentType: file.mimetype, source: source))
        }
        return MultipartForm(parts: parts)
    }

    /// Why a file cannot be sent, or nil when it can.
    static func unreadable(_ path: String) -> String? {
        do {
            close(try LocalFile.openForReading(path))
            return nil
        } catch {
            return error.detail
        }
    }
}
