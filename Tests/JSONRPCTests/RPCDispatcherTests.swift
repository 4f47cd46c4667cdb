import Foundation
import JSONRPC
import XCTest

private struct Echo: RPCMethod {
    static let name = "echo"
    func call(_ params: JSONValue?, context: RPCContext) async throws -> JSONValue {
        var reader = try ParamReader(params)
        let text = try reader.requiredString("text")
        try reader.finish()
        return .string(text)
    }
}

private struct Failing: RPCMethod {
    struct Boom: Error {}
    static let name = "fail"
    func call(_ params: JSONValue?, context: RPCContext) async throws -> JSONValue { throw Boom() }
}

private struct Now: InlineRPCMethod {
    static let name = "now"
    func callInline(_ params: JSONValue?, context: RPCContext) throws -> JSONValue {
        let reader = try ParamReader(params)
        try reader.finish()
        return "inline"
    }
}

/// Answers later from another thread: "later" with the text, or the mapped error.
private struct Later: ReplyingRPCMethod {
    struct Boom: Error {}
    static let name = "later"
    func start(_ params: JSONValue?, context: RPCContext, reply: @escaping Reply) throws {
        var reader = try ParamReader(params)
        let text = try reader.requiredString("text")
        try reader.finish()
        Thread.detachNewThread {
            reply(text == "boom" ? .failure(Boom()) : .success(.string("later " + text)))
        }
    }
}

final class RPCDispatcherTests: XCTestCase {
    let dispatcher = RPCDispatcher(methods: [Echo(), Failing(), Now(), Later()]) { _ in RPCError(.transportFailure, "mapped") }

    func testInlineMethodsAndErrorsAreAnsweredWithoutATask() {
        func prepared(_ text: String) -> RPCDispatcher.Prepared { dispatcher.prepare(line: Array(text.utf8), context: context) }
        guard case .answered(let answer?) = prepared(#"{"jsonrpc":"2.0","id":1,"method":"now"}"#) else { return XCTFail("not inline") }
        XCTAssertEqual(answer["result"], "inline")
        guard case .answered(nil) = prepared(#"{"jsonrpc":"2.0","method":"now"}"#) else { return XCTFail("a notification owes nothing") }
        guard case .answered(let bad?) = prepared(#"{"jsonrpc":"2.0","id":2,"method":"now","params":{"x":1}}"#) else { return XCTFail() }
        XCTAssertEqual(bad["error"]?["data"]?["field"], "x")
        guard case .answered(let missing?) = prepared(#"{"jsonrpc":"2.0","id":3,"method":"nope"}"#) else { return XCTFail() }
        XCTAssertEqual(missing["error"]?["code"], -32601)
        guard case .deferred = prepared(#"{"jsonrpc":"2.0","id":4,"method":"echo","params":{"text":"a"}}"#) else { return XCTFail("async methods run in a task") }
        guard case .deferred = prepared(#"[{"jsonrpc":"2.0","id":5,"method":"now"}]"#) else { return XCTFail("batches run in a task") }
    }
    let context = RPCContext(connectionID: 1) { _, _ in }

    func testReplyingMethodsAnswerOnceFromTheThreadThatFinishes() {
        final class Answers: @unchecked Sendable {
            let lock = NSLock()
            var list: [JSONValue?] = []
            func withLock<T>(_ body: (inout [JSONValue?]) -> T) -> T { lock.withLock { body(&list) } }
        }
        let answers = Answers()
        let done = DispatchSemaphore(value: 0)
        func prepared(_ text: String) -> RPCDispatcher.Prepared {
            dispatcher.prepare(line: Array(text.utf8), context: context) { answer in
                answers.withLock { $0.append(answer) }
                done.signal()
            }
        }
        guard case .started = prepared(#"{"jsonrpc":"2.0","id":1,"method":"later","params":{"text":"a"}}"#) else { return XCTFail("not started") }
        XCTAssertEqual(done.wait(timeout: .now() + 5), .success)
        XCTAssertEqual(answers.withLock { $0 }, [["jsonrpc": "2.0", "id": 1, "result": "later a"]])
        guard case .started = prepared(#"{"jsonrpc":"2.0","id":2,"method":"later","params":{"text":"boom"}}"#) else { return XCTFail() }
        XCTAssertEqual(done.wait(timeout: .now() + 5), .success)
        XCTAssertEqual(answers.withLock { $0.last }??["error"]?["message"], "mapped")
        guard case .started = prepared(#"{"jsonrpc":"2.0","method":"later","params":{"text":"n"}}"#) else { return XCTFail() }
        XCTAssertEqual(done.wait(timeout: .now() + 5), .success)
        XCTAssertEqual(answers.withLock { $0.count }, 3)
        XCTAssertEqual(answers.withLock { $0.last }, .some(nil), "a notification is delivered as nothing owed")
        // Bad params are thrown by start: answered at once, nothing delivered later.
        guard case .answered(let bad?) = prepared(#"{"jsonrpc":"2.0","id":3,"method":"later","params":{"text":1}}"#) else { return XCTFail() }
        XCTAssertEqual(bad["error"]?["code"], -32602)
        XCTAssertEqual(done.wait(timeout: .now() + 0.2), .timedOut)
    }

    func testReplyingMethodsInBatchesAndThroughAnswer() async {
        let single = await answer(#"{"jsonrpc":"2.0","id":7,"method":"later","params":{"text":"b"}}"#)
        XCTAssertEqual(single?["result"], "later b")
        let batch = await answer(#"[{"jsonrpc":"2.0","id":1,"method":"later","params":{"text":"x"}},{"jsonrpc":"2.0","id":2,"method":"later","params":{"text":"boom"}}]"#)
        let members = batch?.arrayValue ?? []
        XCTAssertEqual(members.count, 2)
        XCTAssertEqual(members.first?["result"], "later x")
        XCTAssertEqual(members.last?["error"]?["message"], "mapped")
    }

    private func answer(_ text: String) async -> JSONValue? {
        await dispatcher.answer(line: Array(text.utf8), context: context)
    }

    private func code(_ answer: JSONValue?) -> Int64? {
        if case .integer(let code)? = answer?["error"]?["code"] { return code }
        return nil
    }

    func testResultEchoesIDExactly() async {
        for id in [#""abc""#, "7", "1.5", "null", "-3"] {
            let result = await answer(#"{"jsonrpc":"2.0","id":\#(id),"method":"echo","params":{"text":"hi"}}"#)
            XCTAssertEqual(result?["id"], try JSONCodec.decode(id))
            XCTAssertEqual(result?["result"], .string("hi"))
        }
    }

    func testNotificationGetsNoAnswer() async {
        let result = await answer(#"{"jsonrpc":"2.0","method":"echo","params":{"text":"hi"}}"#)
        XCTAssertNil(result)
    }

    func testStandardErrors() async {
        do { let c = code(await answer(#"{"jsonrpc":"2.0","method":"foobar,"params":"bar","baz]"#)); XCTAssertEqual(c, -32700) }
        do { let c = code(await answer(#"{"jsonrpc":"2.0","method":1,"params":"bar"}"#)); XCTAssertEqual(c, -32600) }
        do { let c = code(await answer(#"{"jsonrpc":"1.0","id":1,"method":"echo"}"#)); XCTAssertEqual(c, -32600) }
        do { let c = code(await answer(#"{"jsonrpc":"2.0","id":1,"method":"echo","params":5}"#)); XCTAssertEqual(c, -32600) }
        do { let c = code(await answer(#"{"jsonrpc":"2.0","id":{},"method":"echo"}"#)); XCTAssertEqual(c, -32600) }
        do { let c = code(await answer(#"{"jsonrpc":"2.0","id":1,"method":"nope"}"#)); XCTAssertEqual(c, -32601) }
        let missing = await answer(#"{"jsonrpc":"2.0","id":1,"method":"echo","params":{}}"#)
        XCTAssertEqual(code(missing), -32602)
        XCTAssertEqual(missing?["error"]?["data"]?["field"], .string("text"))
        let typo = await answer(#"{"jsonrpc":"2.0","id":1,"method":"echo","params":{"text":"a","txet":1}}"#)
        XCTAssertEqual(typo?["error"]?["data"]?["field"], .string("txet"))
        let wrongType = await answer(#"{"jsonrpc":"2.0","id":1,"method":"echo","params":{"text":5}}"#)
        XCTAssertEqual(wrongType?["error"]?["data"]?["field"], .string("text"))
    }

    func testThrownErrorsGoThroughTheMapper() async {
        do { let c = code(await answer(#"{"jsonrpc":"2.0","id":1,"method":"fail"}"#)); XCTAssertEqual(c, -32001) }
    }

    func testBatchesAsTheSpecificationShowsThem() async {
        do { let c = code(await answer("[]")); XCTAssertEqual(c, -32600, "an empty batch is one error, not an array") }
        let invalid = await answer("[1,2,3]")
        XCTAssertEqual(invalid?.arrayValue?.count, 3)
        XCTAssertEqual(invalid?.arrayValue?.compactMap(code), [-32600, -32600, -32600])

        let mixed = await answer(#"""
        [{"jsonrpc":"2.0","method":"echo","params":{"text":"a"},"id":"1"},
         {"jsonrpc":"2.0","method":"echo","params":{"text":"n"}},
         {"jsonrpc":"2.0","method":"echo","params":{"text":"b"},"id":"2"},
         {"foo":"boo"},
         {"jsonrpc":"2.0","method":"foo.get","params":{"name":"myself"},"id":"5"}]
        """#.replacingOccurrences(of: "\n", with: ""))
        let answers = mixed?.arrayValue ?? []
        XCTAssertEqual(answers.count, 4, "the notification is not answered")
        XCTAssertEqual(answers.first(where: { $0["id"] == "1" })?["result"], "a")
        XCTAssertEqual(answers.first(where: { $0["id"] == "2" })?["result"], "b")
        XCTAssertEqual(code(answers.first(where: { $0["id"] == "5" })), -32601)
        XCTAssertEqual(code(answers.first(where: { $0["id"] == .null })), -32600)

        let notificationsOnly = await answer(#"[{"jsonrpc":"2.0","method":"echo","params":{"text":"a"}},{"jsonrpc":"2.0","method":"echo","params":{"text":"b"}}]"#)
        XCTAssertNil(notificationsOnly)
    }
}
