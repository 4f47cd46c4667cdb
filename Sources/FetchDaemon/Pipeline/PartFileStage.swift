import FetchEngine
import FoundationEssentials
import JSONRPC

/// A download's part file: each attempt continues what the file holds with Range + If-Range
/// (the validator of the answer those bytes came from), and the body streams into it. A 416
/// to that range (the file already holds the whole answer, or more) starts the same job over
/// from zero. A failed or cancelled download leaves no empty part file behind.
///
/// Per job (it keeps whether to resume). Its file work runs on the blocking threads, never
/// on an engine thread: each attempt is prepared there (it hashes what the file holds), a
/// 416's file is removed there, by the next step's `prepare`, and a download's job ends
/// there (`JobSpec.preparesOnWorker`).
final class PartFileStage: Stage {
    struct State: JobState {
        /// Whether the next attempt continues what the file holds.
        var resume: Bool
        /// Where the last attempt's range began (0: the whole body).
        var resumedFrom: Int64 = 0
        /// A 416 said the file holds the whole answer or more: it goes before the next step.
        var startOver = false
    }

    let part: PartFile
    let durable: Bool
    let errorBodyLimit: Int
    /// `resume` of the download's params: whether its first attempt may continue a part file.
    let resumes: Bool

    init(part: PartFile, resume: Bool, durable: Bool, errorBodyLimit: Int) {
        self.part = part
        resumes = resume
        self.durable = durable
        self.errorBodyLimit = errorBodyLimit
    }

    func initialState(_ job: Job) -> State {
        State(resume: resumes)
    }

    func prepare(_ attempt: Attempt, _ job: Job) throws -> Preparation {
        let (resume, startOver) = job.withState(of: self) { state in
            defer { state.startOver = false }
            return (state.resume, state.startOver)
        }
        if startOver { part.remove() }
        var offset: Int64 = 0
        var hash = SHA256()
        if resume, let size = part.size, size > 0, let validator = part.validator {
            hash = try part.hash(upTo: size)
            offset = size
            attempt.request.headers.append(HTTPHeader("Range", "bytes=\(size)-"))
            attempt.request.headers.append(HTTPHeader("If-Range", validator))
        }
        job.withState(of: self) { $0.resumedFrom = offset }
        attempt.request.destination = .file(DownloadTarget(
            partPath: part.path, resumeOffset: offset, hashOfExistingBytes: hash, errorBodyLimit: errorBodyLimit,
            writesBackEarly: durable))
        return .proceed
    }

    func judge(_ attempt: Attempt, _ outcome: AttemptOutcome, _ job: Job) -> Verdict {
        guard outcome.successStatus == 416 else { return .pass }
        // Judged on the engine thread that ended the transfer: the file, possibly the whole
        // size, is removed by the next step's prepare, on the blocking threads.
        let startsOver = job.withState(of: self) { state -> Bool in
            guard state.resumedFrom > 0 else { return false }
            state.startOver = true
            state.resume = false
            return true
        }
        return startsOver ? .next : .pass
    }

    func jobEnded(_ job: Job, _ ending: JobEnding) {
        // A job cancelled between a 416 and the next step: that file holds nothing to resume.
        if job.state(of: self).startOver { part.remove() }
        if !ending.succeeded { part.removeIfEmpty() }
    }
}
