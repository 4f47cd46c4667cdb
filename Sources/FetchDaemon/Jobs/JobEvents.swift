import FetchEngine
import FoundationEssentials
import Glibc
import JSONRPC
import Synchronization

/// `subscribe`: every connection that subscribed hears a `jobEvent` for every job of every
/// client (queued, started, retrying, finished, failed, cancelled), naming the client
/// process, its URL redacted as HTTP logs are (`JobSeenByOthers`). With no subscriber, an
/// event costs one atomic load.
///
/// Bounded: a subscriber that does not read is not sent more. While more than
/// `dropAboveBytes` (256 KiB) of answers and notifications wait for it, its events are dropped and
/// counted (`fetchd_job_events_dropped_total`); the next event it gets says how many it
/// missed (`dropped`), so a live view knows to reload with listJobs.
final class JobEvents: Sendable {
    /// Where a connection starts to coalesce notifications: past it, jobEvents are dropped
    /// rather than kept (one per job) until the client reads.
    static let dropAboveBytes = Connection.coalesceNotificationsAboveBytes

    private struct Subscriber {
        let context: RPCContext
        let budget: BodyBudget?
        var dropped = 0
    }

    private let subscribers = Locked<[UInt64: Subscriber]>([:])
    private let subscriberCount = Atomic<Int>(0)
    let clients: ClientDirectory
    private let metrics: Metrics

    init(clients: ClientDirectory, metrics: Metrics) {
        self.clients = clients
        self.metrics = metrics
    }

    func subscribe(_ context: RPCContext, budget: BodyBudget?) {
        subscribers.withLock { s in
            if s[context.connectionID] == nil { s[context.connectionID] = Subscriber(context: context, budget: budget) }
            subscriberCount.store(s.count, ordering: .relaxed)
        }
    }

    func unsubscribe(_ connectionID: UInt64) {
        subscribers.withLock { s in
            s[connectionID] = nil
            subscriberCount.store(s.count, ordering: .relaxed)
        }
    }

    enum Event: String {
        case queued, started, retrying, finished, failed, cancelled
    }

    /// Tells every subscriber; `status` for a finished job's HTTP status.
    func publish(_ job: Job, _ event: Event, status: Int? = nil) {
        guard subscriberCount.load(ordering: .relaxed) > 0 else { return }
        let client = clients.client(job.connectionID)
        var params: JSONObject = [
            "jobId": .string(job.id), "kind": .string(job.spec.kind.rawValue),
            "url": .string(JobSeenByOthers(job.spec.request).redactedURL), "event": .string(event.rawValue),
        ]
        if let status { params["status"] = JSONValue(status) }
        params["connection"] = ["pid": client.map { JSONValue(Int($0.pid)) } ?? .null, "command": JSONValue(client?.command)]
        // Decided under the lock, sent outside it.
        let deliveries = subscribers.withLock { s -> [(RPCContext, Int)] in
            var out: [(RPCContext, Int)] = []
            for (id, subscriber) in s {
                if let budget = subscriber.budget, budget.outboundBytes > Self.dropAboveBytes {
                    s[id]?.dropped += 1
                    metrics.count(.jobEventsDropped)
                } else {
                    out.append((subscriber.context, subscriber.dropped))
                    s[id]?.dropped = 0
                }
            }
            return out
        }
        for (context, dropped) in deliveries {
            var sent = params
            if dropped > 0 { sent["dropped"] = JSONValue(dropped) }
            context.notify("jobEvent", .object(sent))
        }
    }
}
