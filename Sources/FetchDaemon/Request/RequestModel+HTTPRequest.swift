import FetchEngine
import JSONRPC

extension RequestModel {
    /// The engine's request: query appended, body encoded, content type chosen.
    func httpRequest(maxBodyBytes: Int) -> HTTPRequest {
        let url = URLEncoding.appendingQuery(query.map { ($0.name, $0.value) }, to: self.url.text)
        var headers = self.headers
        var engineBody = RequestBody.none
        var contentType: String? = nil
        switch body {
        case .none: break
        case .json(let value):
            engineBody = .bytes(JSONCodec.encode(value))
            contentType = "application/json"
        case .form(let items):
            engineBody = .bytes(Array(URLEncoding.form(items.map { ($0.name, $0.value) }).utf8))
            contentType = "application/x-www-form-urlencoded"
        case .text(let text):
            engineBody = .bytes(Array(text.utf8))
            contentType = "text/plain; charset=utf-8"
        case .bytes(let bytes):
            engineBody = .bytes(bytes)
            contentType = "application/octet-stream"
        case .file(let path):
            engineBody = .file(path: path)
            contentType = "application/octet-stream"
        }
        // A Content-Type given as null leaves the body without one (curl's -T sends none).
        if let contentType, !headers.contains(where: { $0.name.lowercased() == "content-type" }),
           !removedHeaders.contains(where: { $0.lowercased() == "content-type" }) {
            headers.append(HTTPHeader("Content-Type", contentType))
        }
        var request = HTTPRequest(
            method: method, url: url, headers: headers, body: engineBody,
            timeoutMs: Self.milliseconds(timeout), connectTimeoutMs: Self.milliseconds(connectTimeout),
            maxRedirects: maxRedirects, maxBodyBytes: maxBodyBytes)
        request.parsedURL = self.url.parsed  // used while the URL is this one (no query added)
        request.cookieJar = cookieJar
        request.removedHeaders = removedHeaders
        request.recordsExchange = exchange
        if hasRouting { routing.apply(to: &request) }
        return request
    }

    private static func milliseconds(_ seconds: Double) -> Int {
        max(1, Int((seconds * 1000).rounded(.up)))
    }
}

extension RequestModel {
    /// The method's defaults with the request's `retry` applied over them.
    var retryPolicy: RetryPolicy {
        var policy = RetryPolicy.defaults(for: method)
        if let enabled = retry.enabled { policy.enabled = enabled }
        if let maxAttempts = retry.maxAttempts { policy.maxAttempts = maxAttempts }
        if let maxInterval = retry.maxInterval { policy.maxInterval = maxInterval }
        if let statuses = retry.statuses { policy.statuses = Set(statuses) }
        policy.delay = retry.delay
        policy.maxElapsed = retry.maxElapsed
        if let allErrors = retry.allErrors { policy.allErrors = allErrors }
        return policy
    }
}
