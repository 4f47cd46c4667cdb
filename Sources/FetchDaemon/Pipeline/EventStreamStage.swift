import FetchEngine

/// The requests of an `events` job (`EventsDelivery`): each connection asks for
/// `text/event-stream` (unless the request names its own `Accept`), and each reconnection
/// sends the last event ID the streams gave as `Last-Event-ID` (in place of the request's
/// own). The first of the job's stages, so every other one sees the request as it is sent: a
/// stub may match on `Last-Event-ID`, the HTTP log shows it. The reconnections themselves are
/// the delivery's verdicts (`BodyDeliveryStage`, judged first).
///
/// Per job (it reads the job's delivery).
final class EventStreamStage: Stage {
    let delivery: EventsDelivery

    init(delivery: EventsDelivery) {
        self.delivery = delivery
    }

    func prepare(_ attempt: Attempt, _ job: Job) throws -> Preparation {
        let request = attempt.request
        if request.header(named: "Accept") == nil, !request.removedHeaders.contains(where: { $0.caseInsensitiveEquals("Accept") }) {
            attempt.request.headers.append(HTTPHeader("Accept", "text/event-stream"))
        }
        if let id = delivery.lastEventIDToSend {
            attempt.request.headers.removeAll { $0.name.caseInsensitiveEquals("Last-Event-ID") }
            attempt.request.headers.append(HTTPHeader("Last-Event-ID", id))
        }
        return .proceed
    }
}
