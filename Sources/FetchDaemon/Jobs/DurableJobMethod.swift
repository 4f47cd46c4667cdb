import JSONRPC

/// `download` and `upload`: a job that may be durable, started from a request's params or,
/// after a restart, from what was written down.
protocol DurableJobMethod: RPCMethod {
    var driver: JobDriver { get }
    /// `resuming`: what a daemon before wrote down (nil: a client's request).
    func spec(_ params: JSONValue?, resuming: DurableStore.Record?) throws -> JobSpec
}

extension DurableJobMethod {
    func call(_ params: JSONValue?, context: RPCContext) async throws -> JSONValue {
        try await driver.run(try spec(params, resuming: nil), context: context)
    }

    /// A durable job left by the daemon before: started again with its jobId (a download
    /// continues its part file, an upload starts over).
    func resume(_ record: DurableStore.Record) throws {
        try driver.start(try spec(record.params, resuming: record), context: .resumed) { _ in }
    }
}

extension RPCContext {
    /// A durable job resumed at start has no connection: its answer goes to `attach` and
    /// `getJob` (connection ids start at 1).
    static let resumed = RPCContext(connectionID: 0, notify: { _, _ in })
}
