import FetchEngine
import XCTest

/// The reconnection rules of an `events` job, with the time given (no clock, no sleeping).
final class EventStreamReconnectionTests: XCTestCase {
    let stream = "text/event-stream; charset=utf-8"

    func testOnlyA200EventStreamOpensAStream() {
        XCTAssertTrue(EventStreamReconnection.opensStream(status: 200, contentType: "text/event-stream"))
        XCTAssertTrue(EventStreamReconnection.opensStream(status: 200, contentType: " Text/Event-Stream ;charset=utf-8"))
        XCTAssertFalse(EventStreamReconnection.opensStream(status: 200, contentType: "text/plain"))
        XCTAssertFalse(EventStreamReconnection.opensStream(status: 200, contentType: "text/event-streams"))
        XCTAssertFalse(EventStreamReconnection.opensStream(status: 200, contentType: nil))
        XCTAssertFalse(EventStreamReconnection.opensStream(status: 201, contentType: "text/event-stream"))
        XCTAssertFalse(EventStreamReconnection.opensStream(status: 204, contentType: "text/event-stream"))
    }

    func testBeforeAStreamOpensTheJobIsAnyRequest() {
        var policy = EventStreamReconnection()
        XCTAssertEqual(policy.decide(.answer(status: 503, contentType: "text/plain"), retryMs: nil, now: 0, deadline: nil), .asAnyRequest)
        XCTAssertEqual(policy.decide(.failure(.connect, streaming: false), retryMs: nil, now: 0, deadline: nil), .asAnyRequest)
        XCTAssertEqual(policy.decide(.answer(status: 204, contentType: nil), retryMs: nil, now: 0, deadline: nil), .asAnyRequest)
        XCTAssertEqual(policy.reconnects, 0)
    }

    func testAStreamThatEndsOrBreaksIsConnectedAgainAfterTheServersRetry() {
        var policy = EventStreamReconnection()
        policy.opened()
        XCTAssertEqual(policy.decide(.answer(status: 200, contentType: stream), retryMs: nil, now: 10, deadline: nil),
                       .reconnect(afterMs: 1000), "the default wait")
        policy.opened()
        XCTAssertEqual(policy.decide(.failure(.reset, streaming: true), retryMs: 250, now: 11, deadline: nil), .reconnect(afterMs: 250))
        policy.opened()
        XCTAssertEqual(policy.decide(.failure(.protocol, streaming: true), retryMs: 0, now: 12, deadline: nil), .reconnect(afterMs: 0))
        XCTAssertEqual(policy.reconnects, 3)
        XCTAssertEqual(policy.streams, 3)
    }

    func testOnceStreamingAnAnswerThatIsNoStreamIsTheResult() {
        for (status, type) in [(204, nil), (204, stream), (200, "text/plain"), (500, "text/plain"), (503, stream), (401, "application/json")] {
            var policy = EventStreamReconnection()
            policy.opened()
            XCTAssertEqual(policy.decide(.answer(status: status, contentType: type), retryMs: 100, now: 0, deadline: nil), .result,
                           "\(status) \(type ?? "-")")
            XCTAssertEqual(policy.reconnects, 0)
        }
    }

    func testOnceStreamingAConnectionThatFailsBeforeItsHeadEndsTheJob() {
        var policy = EventStreamReconnection()
        policy.opened()
        XCTAssertEqual(policy.decide(.failure(.reset, streaming: true), retryMs: 100, now: 0, deadline: nil), .reconnect(afterMs: 100))
        XCTAssertEqual(policy.decide(.failure(.connect, streaming: false), retryMs: 100, now: 0.1, deadline: nil), .fail)
    }

    func testTheDeadlineEndsTheJob() {
        var policy = EventStreamReconnection()
        policy.opened()
        // A wait that ends before the deadline; one that would reach it.
        XCTAssertEqual(policy.decide(.answer(status: 200, contentType: stream), retryMs: 500, now: 9.4, deadline: 10), .reconnect(afterMs: 500))
        policy.opened()
        XCTAssertEqual(policy.decide(.answer(status: 200, contentType: stream), retryMs: 500, now: 9.5, deadline: 10), .deadline)
        // A stream the deadline cut (its timeout), a timeout before it (connect again).
        var cut = EventStreamReconnection()
        cut.opened()
        XCTAssertEqual(cut.decide(.failure(.timeout, streaming: true), retryMs: 0, now: 9.99, deadline: 10), .deadline)
        XCTAssertEqual(cut.decide(.failure(.timeout, streaming: true), retryMs: 0, now: 5, deadline: 10), .reconnect(afterMs: 0))
        XCTAssertEqual(cut.reconnects, 1)
    }
}
