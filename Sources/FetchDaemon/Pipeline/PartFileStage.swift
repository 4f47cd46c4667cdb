import FetchEngine
import FoundationEssentials
import JSONRPC

/// A download's part file: each attempt continues what the file holds with Range + If-Range
/// (the validator of the answer those bytes came from), and the body streams into it. A 416
/// to that range (the file already holds the whole answer, or more) starts the same job over
/// from zero. A failed or cancelled download leaves no empty part file behind.
///
/// Per job (it keeps whether to resume); prepared on the blocking threads (it hashes what
/// the file holds).
final class PartFileStage: Stage, @unchecked Sendable {
    let part: PartFile
    let durable: Bool
    let errorBodyLimit: Int
    // The job's steps only, one at a time (see Stage).
    private var resume: Bool
    private var resumedFrom: Int64 = 0

    init(part: PartFile, resume: Bool, durable: Bool, errorBodyLimit: Int) {
        self.part = part
        self.resume = resume
        self.durable = durable
        self.errorBodyLimit = errorBodyLimit
    }

    func prepare(_ attempt: Attempt, _ job: Job) throws -> Preparation {
        var offset: Int64 = 0
        var hash = SHA256()
        if resume, let size = part.size, size > 0, let validator = part.validator {
            hash = try part.hash(upTo: size)
            offset = size
            attempt.request.headers.append(HTTPHeader("Range", "bytes=\(size)-"))
            attempt.request.headers.append(HTTPHeader("If-Range", validator))
        }
        resumedFrom = offset
        attempt.request.destination = .file(DownloadTarget(
            partPath: part.path, resumeOffset: offset, hashOfExistingBytes: hash, errorBodyLimit: errorBodyLimit,
            writesBackEarly: durable))
        return .proceed
    }

    func judge(_ attempt: Attempt, _ outcome: AttemptOutcome, _ job: Job) -> Verdict {
        guard case .success(let answer) = outcome, answer.status == 416, resumedFrom > 0 else { return .pass }
        part.remove()
        resume = false
        return .next
    }

    func jobEnded(_ job: Job, _ answer: Result<JSONValue, any Error>) {
        if case .failure = answer { part.removeIfEmpty() }
    }
}
