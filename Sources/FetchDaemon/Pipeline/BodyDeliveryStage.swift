import FetchEngine
import JSONRPC

/// A streamed job's rules that come before every other stage's: added last to a fetch whose
/// response body streams (`BodyDelivery`) or whose request body is read from a descriptor
/// (`bodyFrom`), so that it is judged first, nearest the network.
///
/// - Once something reached the client, the job is never retried: the delivery judges the
///   attempt (by default `.final`, or the failure with `data.streamed`) and no stage after it
///   is asked.
/// - A request body read from a descriptor cannot be sent again once a byte of it was read:
///   such an attempt is final too.
/// - When the job is answered, the delivery and the request body's reader close their
///   descriptors.
final class BodyDeliveryStage: Stage {
    let delivery: (any BodyDelivery)?
    let upload: (any BodySource & ClosableBody)?

    init(delivery: (any BodyDelivery)?, upload: (any BodySource & ClosableBody)?) {
        self.delivery = delivery
        self.upload = upload
    }

    func prepare(_ attempt: Attempt, _ job: Job) throws -> Preparation {
        delivery?.bind(job)
        return .proceed
    }

    func judge(_ attempt: Attempt, _ outcome: AttemptOutcome, _ job: Job) -> Verdict {
        if let delivery {
            let verdict = delivery.judge(attempt, outcome, job)
            if case .pass = verdict {} else { return verdict }
        }
        if let upload, upload.consumed > 0 { return .final }
        return .pass
    }

    func jobEnded(_ job: Job, _ ending: JobEnding) {
        delivery?.close()
        upload?.close()
    }
}

/// A body that holds a descriptor: closed when its job ends (idempotent).
protocol ClosableBody: AnyObject, Sendable {
    func close()
}
