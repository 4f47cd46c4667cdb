import FetchEngine
import JSONRPC

/// The body kept in memory (up to `maxBodyBytes`) and put in the answer, as `responseBody`
/// says (`body`, `bodyBase64`, `json`, nothing): every fetch that does not stream. It holds
/// nothing of a job, so one per mode serves every request (`FetchMethod` makes them once).
final class WholeBodyDelivery: BodyDelivery {
    let mode: ResponseBody.Mode

    init(mode: ResponseBody.Mode) {
        self.mode = mode
    }

    /// One for each mode that does not stream, made once.
    static func byMode() -> [ResponseBody.Mode: WholeBodyDelivery] {
        var table: [ResponseBody.Mode: WholeBodyDelivery] = [:]
        for mode in ResponseBody.Mode.allCases where !mode.streams { table[mode] = WholeBodyDelivery(mode: mode) }
        return table
    }

    var receiver: (any BodyReceiver)? { nil }
    var delivered: Int64? { nil }

    func bind(_ job: Job) {}

    func deliverRest(_ response: HTTPResponse, _ job: Job, then done: @escaping @Sendable ((any Error)?) -> Void) {
        done(nil)  // the answer carries it
    }

    func addResult(_ response: HTTPResponse, to result: inout JSONObject) {
        result.append(distinctKey: "bytes", JSONValue(response.body.count))
        ResponseBody.add(response.body, mode: mode, to: &result)
    }

    func close() {}
}
