/// Turns one line from a client into at most one line of answer: single requests, batches,
/// notifications, and every standard error of JSON-RPC 2.0.
public struct RPCDispatcher: Sendable {
    public typealias ErrorMapper = @Sendable (any Error) -> RPCError

    private let methods: [String: any RPCMethod]
    private let mapError: ErrorMapper

    public init(methods: [any RPCMethod], mapError: @escaping ErrorMapper) {
        var table: [String: any RPCMethod] = [:]
        for method in methods { table[type(of: method).name] = method }
        self.methods = table
        self.mapError = mapError
    }

    public var methodNames: [String] { methods.keys.sorted() }

    /// What to do with one line: answered already (on the calling thread), or a decoded
    /// message that needs `answer(message:context:)` in a task.
    public enum Prepared: Sendable {
        /// nil: nothing is owed (a notification).
        case answered(JSONValue?)
        case deferred(JSONValue)
    }

    /// Decodes a line and answers at once what can be answered without waiting: parse
    /// errors, invalid requests, unknown methods and `InlineRPCMethod`s. Saves a thread hop
    /// for the cheap methods (a `ping` costs about what a C echo server's does).
    public func prepare(line: [UInt8], context: RPCContext) -> Prepared {
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
        guard let method = methods[request.method] else {
            guard let id = request.id else { return .answered(nil) }
            return .answered(RPCMessage.error(id: id, .methodNotFound(request.method)))
        }
        guard let inline = method as? any InlineRPCMethod else { return .deferred(message) }
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

    /// The answer to one line (nil when nothing is owed: a notification, or a batch of them).
    public func answer(line: [UInt8], context: RPCContext) async -> JSONValue? {
        switch prepare(line: line, context: context) {
        case .answered(let answer): return answer
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
        // Members of a batch run concurrently; answers come back in one array.
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
        guard let method = methods[request.method] else {
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
