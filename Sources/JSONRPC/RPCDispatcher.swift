import Synchronization

/// Turns one line from a client into at most one line of answer: single requests, batches,
/// notifications, and every standard error of JSON-RPC 2.0.
public struct RPCDispatcher: Sendable {
    public typealias ErrorMapper = @Sendable (any Error) -> RPCError

    /// A method with the way it runs, worked out once when the table is built: a dynamic
    /// cast to a protocol per request showed up in profiles of `ping`.
    private enum Entry: Sendable {
        case replying(any ReplyingRPCMethod)
        case inline(any InlineRPCMethod)
        case async(any RPCMethod)

        init(_ method: any RPCMethod) {
            if let replying = method as? any ReplyingRPCMethod {
                self = .replying(replying)
            } else if let inline = method as? any InlineRPCMethod {
                self = .inline(inline)
            } else {
                self = .async(method)
            }
        }

        var method: any RPCMethod {
            switch self {
            case .replying(let method): method
            case .inline(let method): method
            case .async(let method): method
            }
        }
    }

    private let methods: [String: Entry]
    private let mapError: ErrorMapper

    public init(methods: [any RPCMethod], mapError: @escaping ErrorMapper) {
        var table: [String: Entry] = [:]
        for method in methods { table[type(of: method).name] = Entry(method) }
        self.methods = table
        self.mapError = mapError
    }

    public var methodNames: [String] { methods.keys.sorted() }

    /// What to do with one line: answered already (on the calling thread), started (its
    /// answer goes to `later`), or a decoded message that needs `answer(message:context:)`
    /// in a task.
    public enum Prepared: Sendable {
        /// nil: nothing is owed (a notification).
        case answered(JSONValue?)
        /// A `ReplyingRPCMethod` started; its answer (nil for a notification) is passed to
        /// `later` exactly once, possibly before `prepare` returns.
        case started
        case deferred(JSONValue)
    }

    /// Decodes a line and answers at once what can be answered without waiting: parse
    /// errors, invalid requests, unknown methods and `InlineRPCMethod`s. Saves a thread hop
    /// for the cheap methods (a `ping` costs about what a C echo server's does).
    /// `ReplyingRPCMethod`s are started here and answer through `later`.
    public func prepare(
        line: [UInt8], context: RPCContext, later: @escaping @Sendable (JSONValue?) -> Void = { _ in }
    ) -> Prepared {
        let message: JSONValue
        do {
            message = try JSONCodec.decode(line)
        } catch {
            return .answered(RPCMessage.error(id: .null, .parseError(error.message)))
        }
        guard case .object = message else { return .deferred(message) }
        let request: RPCRequest
        switch RPCRequest.validate(message) {
        case .failure(let failure): return .answered(RPCMessage.error(id: failure.id, failure.error))
        case .success(let valid): request = valid
        }
        let inline: any InlineRPCMethod
        switch methods[request.method] {
        case nil:
            guard let id = request.id else { return .answered(nil) }
            return .answered(RPCMessage.error(id: id, .methodNotFound(request.method)))
        case .replying(let replying):
            return start(replying, request, context: context, later: later)
        case .async:
            return .deferred(message)
        case .inline(let method):
            inline = method
        }
        let outcome: Result<JSONValue, RPCError>
        do {
            outcome = .success(try inline.callInline(request.params, context: context))
        } catch let error as RPCError {
            outcome = .failure(error)
        } catch {
            outcome = .failure(mapError(error))
        }
        guard let id = request.id else { return .answered(nil) }
        switch outcome {
        case .success(let result): return .answered(RPCMessage.result(id: id, result))
        case .failure(let error): return .answered(RPCMessage.error(id: id, error))
        }
    }

    private func start(
        _ method: any ReplyingRPCMethod, _ request: RPCRequest, context: RPCContext,
        later: @escaping @Sendable (JSONValue?) -> Void
    ) -> Prepared {
        let id = request.id
        let mapError = self.mapError
        do {
            try method.start(request.params, context: context) { outcome in
                guard let id else { return later(nil) }
                switch outcome {
                case .success(let result): later(RPCMessage.result(id: id, result))
                case .failure(let error as RPCError): later(RPCMessage.error(id: id, error))
                case .failure(let error): later(RPCMessage.error(id: id, mapError(error)))
                }
            }
        } catch {
            guard let id else { return .answered(nil) }
            return .answered(RPCMessage.error(id: id, error as? RPCError ?? mapError(error)))
        }
        return .started
    }

    /// The answer to one line (nil when nothing is owed: a notification, or a batch of them).
    public func answer(line: [UInt8], context: RPCContext) async -> JSONValue? {
        let started = StartedAnswer()
        switch prepare(line: line, context: context, later: { started.deliver($0) }) {
        case .answered(let answer): return answer
        case .started: return await started.value
        case .deferred(let message): return await answer(message: message, context: context)
        }
    }

    /// The answer to a decoded message: a request, a notification or a batch.
    public func answer(message: JSONValue, context: RPCContext) async -> JSONValue? {
        guard case .array(let batch) = message else {
            return await answer(message, context: context)
        }
        if batch.isEmpty {
            return RPCMessage.error(id: .null, .invalidRequest("empty batch"))
        }
        // Members of a batch run concurrently; answers come back in one array. They take no
        // descriptor: which would take which is not fixed.
        var plain = context
        plain.descriptors = nil
        let context = plain
        let answers = await withTaskGroup(of: (Int, JSONValue?).self) { group in
            for (index, member) in batch.enumerated() {
                group.addTask { (index, await self.answer(member, context: context)) }
            }
            var collected = [JSONValue?](repeating: nil, count: batch.count)
            for await (index, answer) in group { collected[index] = answer }
            return collected.compactMap { $0 }
        }
        return answers.isEmpty ? nil : .array(answers)
    }

    private func answer(_ message: JSONValue, context: RPCContext) async -> JSONValue? {
        let request: RPCRequest
        switch RPCRequest.validate(message) {
        case .failure(let failure): return RPCMessage.error(id: failure.id, failure.error)
        case .success(let valid): request = valid
        }
        let outcome = await perform(request, context: context)
        guard let id = request.id else { return nil }
        switch outcome {
        case .success(let result): return RPCMessage.result(id: id, result)
        case .failure(let error): return RPCMessage.error(id: id, error)
        }
    }

    public func perform(_ request: RPCRequest, context: RPCContext) async -> Result<JSONValue, RPCError> {
        guard let method = methods[request.method]?.method else {
            return .failure(.methodNotFound(request.method))
        }
        do {
            return .success(try await method.call(request.params, context: context))
        } catch let error as RPCError {
            return .failure(error)
        } catch {
            return .failure(mapError(error))
        }
    }
}

/// Hands the answer of a started method to one awaiting task, whichever comes first.
private final class StartedAnswer: Sendable {
    private struct State {
        var answer: JSONValue??
        var waiter: CheckedContinuation<JSONValue?, Never>?
    }
    private let state = Mutex(State())

    func deliver(_ answer: JSONValue?) {
        let waiter = state.withLock { s -> CheckedContinuation<JSONValue?, Never>? in
            guard let waiter = s.waiter else {
                s.answer = .some(answer)
                return nil
            }
            s.waiter = nil
            return waiter
        }
        waiter?.resume(returning: answer)
    }

    var value: JSONValue? {
        get async {
            await withCheckedContinuation { continuation in
                let ready = state.withLock { s -> JSONValue?? in
                    guard let answer = s.answer else {
                        s.waiter = continuation
                        return nil
                    }
                    return .some(answer)
                }
                if let ready { continuation.resume(returning: ready) }
            }
        }
    }
}
