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
        if let budget {
            guard budget.reserve(bodyBytes, for: budgetID, resume: resume) else { return false }
        }
        context.notify(method, params())
        // Queued for the client now: counted there (the connection reports what waits).
        budget?.released(budgetID, holding: bodyBytes)
        return true
    }

    /// Sends a notification that carries no body (a head, a count): not held back.
    func send(_ method: String, _ params: JSONValue) {
        context.notify(method, params)
    }
}
