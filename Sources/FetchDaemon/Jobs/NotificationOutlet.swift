import FetchEngine
import JSONRPC

/// Sends one job's notifications of a streamed body (`responseHead`, `bodyChunk`, and the
/// other modes' own) to the connection that asked, in order and never coalesced
/// (`Connection.inOrderNotifications`). Each notification that carries body bytes counts them
/// against the connection's `BodyBudget` first: a client that does not read has its own
/// transfers paused, and nothing else.
final class NotificationOutlet: Sendable {
    let jobID: String
    private let budgetID: UInt64
    private let context: RPCContext
    private let budget: BodyBudget?

    init(job: Job) {
        jobID = job.id
        budgetID = job.transferID
        context = job.context
        budget = job.bodyBudget
    }

    /// Engine thread (or the thread that ends the job): sends the notification `params`
    /// makes, counting `bodyBytes` against the connection's budget. False: there is no room
    /// now, nothing was sent, and `resume` is called (from any thread) once there may be;
    /// the caller answers `.pause` and sends it again then.
    func send(_ method: String, bodyBytes: Int, resume: @escaping @Sendable () -> Void, _ params: () -> JSONValue) -> Bool {
        sendEach(bodyBytes: bodyBytes, resume: resume) { send in send(method, params()) }
    }

    /// `send` for the notifications one piece of the body makes (its lines, its events): room
    /// for the piece's `bodyBytes` is asked once, then `notify` sends each of them through the
    /// function it is given, in order. False: no room now, `notify` was not called.
    func sendEach(bodyBytes: Int, resume: @escaping @Sendable () -> Void,
                  _ notify: (_ send: (String, JSONValue) -> Void) -> Void) -> Bool {
        if let budget {
            guard budget.reserve(bodyBytes, for: budgetID, resume: resume) else { return false }
        }
        notify { method, params in context.notify(method, params) }
        // Queued for the client now: counted there (the connection reports what waits).
        budget?.released(budgetID, holding: bodyBytes)
        return true
    }

    /// A response's head (`responseHead`): its status, headers, HTTP version and URL.
    func sendHead(_ head: ResponseHead) {
        context.notify("responseHead", [
            "jobId": .string(jobID), "status": JSONValue(head.status), "headers": ResponseFields.headers(head.headers),
            "httpVersion": .string(head.httpVersion), "url": .string(head.url),
        ])
    }

    /// Sends a notification that carries no body (a head, a count): not held back.
    func send(_ method: String, _ params: JSONValue) {
        context.notify(method, params)
    }
}

/// A delivery that sends notifications (`stream`, `lines`, `events`): its own receiver of
/// every attempt's body, bound to its job's outlet before each attempt.
protocol OutletDelivery: BodyDelivery, BodyReceiver {
    var slot: OutletSlot { get }
}

extension OutletDelivery {
    var receiver: (any BodyReceiver)? { self }

    func bind(_ job: Job) {
        slot.bind(job)
    }

    /// Nil until the delivery is first bound.
    var outlet: NotificationOutlet? { slot.outlet }
}

/// A delivery's outlet, made the first time the delivery is bound to its job
/// (`BodyDelivery.bind`, before each attempt): nil until then.
final class OutletSlot: Sendable {
    private let slot = Locked<NotificationOutlet?>(nil)

    func bind(_ job: Job) {
        slot.withLock { outlet in
            if outlet == nil { outlet = NotificationOutlet(job: job) }
        }
    }

    var outlet: NotificationOutlet? { slot.withLock { $0 } }
}

extension ResponseHead {
    /// The head of an answer that did not stream (a stub's, a body kept in memory).
    init(of response: HTTPResponse) {
        self.init(status: response.status, headers: response.headers, httpVersion: response.httpVersion, url: response.url)
    }
}
