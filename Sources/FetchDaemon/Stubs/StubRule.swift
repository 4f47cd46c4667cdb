import FetchEngine
import JSONRPC
import Synchronization

/// A request as a stub's `match` sees it (the attempt's request, after the stages before
/// the stub stage: the cookie jar is chosen, no Range of a resumed download yet).
struct StubRequest: Sendable {
    var method: String
    /// As sent, query included.
    var url: String
    var headers: [HTTPHeader]
    /// nil: a body not held in memory (a file, multipart), which bodyJson and bodyContains never match.
    var body: [UInt8]?

    init(method: String, url: String, headers: [HTTPHeader] = [], body: [UInt8]? = []) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
    }

    init(_ request: HTTPRequest) {
        let body: [UInt8]?
        switch request.body {
        case .none: body = []
        case .bytes(let bytes): body = bytes
        case .file, .fileRange, .multipart, .stream: body = nil
        }
        self.init(method: request.method, url: request.url, headers: request.headers, body: body)
    }

    /// The query's parameters, percent-decoded ('+' is a space, as in forms).
    var query: [(name: String, value: String)] {
        guard let mark = url.firstIndex(of: "?") else { return [] }
        let rest = url[url.index(after: mark)...]
        let text = rest[..<(rest.firstIndex(of: "#") ?? rest.endIndex)]
        return text.split(separator: "&", omittingEmptySubsequences: true).map { pair in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            return (Self.decoded(parts[0]), parts.count > 1 ? Self.decoded(parts[1]) : "")
        }
    }

    /// '+' is a space; a bad escape or bytes that are not UTF-8 leave the text as sent.
    static func decoded(_ text: Substring) -> String {
        let spaced = String(text).replacing("+", with: " ")
        return URLEncoding.decode(spaced) ?? spaced
    }
}

/// A stub's `match`: every member given must hold. Pure: `differences` names what does not.
struct StubMatch: Sendable {
    enum URLRule: Sendable {
        /// The URL as sent, query included (use urlPrefix with `query` to match some parameters).
        case exact(String)
        case prefix(String)
        case pattern(URLPattern)
    }

    var method: String?
    var url: URLRule?
    var query: [(name: String, value: String)] = []
    var headers: [(name: String, value: String)] = []
    var bodyJson: JSONValue?
    var bodyContains: String?
    /// As the client gave it (getStubs shows it).
    var given: JSONObject = [:]

    /// One recorded request exactly (loadStubs, recordStubs): its method, its URL as sent, and
    /// its body when it had one.
    static func recorded(method: String, url: String, body: String) -> StubMatch {
        var match = StubMatch(method: method, url: .exact(url))
        var given: JSONObject = ["method": .string(method), "url": .string(url)]
        if !body.isEmpty {
            match.bodyContains = body
            given["bodyContains"] = .string(body)
        }
        match.given = given
        return match
    }

    func matches(_ request: StubRequest) -> Bool {
        differences(request, all: false).isEmpty
    }

    /// How `differences` learns whether the URL rule holds: tested there, known already (a
    /// pattern matched in slices, `StubSearch`), or left out.
    enum URLCheck {
        case test, known(Bool), skip
    }

    /// What does not hold, named as protocol.md names it: "method", "url", "query.NAME",
    /// "headers.NAME", "body". Empty: the request matches. `all: false` stops at the first.
    func differences(_ request: StubRequest, all: Bool = true, url check: URLCheck = .test) -> [String] {
        var found: [String] = []
        func differ(_ name: String) -> Bool {
            found.append(name)
            return !all
        }
        if let method, !method.caseInsensitiveEquals(request.method), differ("method") { return found }
        if url != nil {
            let holds: Bool
            switch check {
            case .test: holds = urlHolds(request)
            case .known(let known): holds = known
            case .skip: holds = true
            }
            if !holds, differ("url") { return found }
        }
        if !query.isEmpty {
            let sent = request.query
            for item in query where !sent.contains(where: { $0.name == item.name && $0.value == item.value }) {
                if differ("query.\(item.name)") { return found }
            }
        }
        for header in headers
        where !request.headers.contains(where: { $0.name.caseInsensitiveEquals(header.name) && $0.value == header.value }) {
            if differ("headers.\(header.name)") { return found }
        }
        if (bodyJson != nil || bodyContains != nil) && !bodyHolds(request.body), differ("body") { return found }
        return found
    }

    /// The URL rule's pattern, when it is one: matched apart, in slices (`StubSearch`).
    var urlPattern: URLPattern? {
        if case .pattern(let pattern)? = url { return pattern }
        return nil
    }

    /// The URL rule holds (or there is none).
    func urlHolds(_ request: StubRequest) -> Bool {
        switch url {
        case nil: true
        case .exact(let url): url == request.url
        case .prefix(let prefix): request.url.hasPrefix(prefix)
        case .pattern(let pattern): pattern.matches(request.url)
        }
    }

    private func bodyHolds(_ body: [UInt8]?) -> Bool {
        guard let body else { return false }
        if let bodyContains {
            let needle = Array(bodyContains.utf8)
            if !needle.isEmpty && (body.count < needle.count
                || !(0...(body.count - needle.count)).contains(where: { body[$0..<($0 + needle.count)].elementsEqual(needle) })) {
                return false
            }
        }
        if let bodyJson {
            guard let sent = try? JSONCodec.decode(body), Self.sameJSON(sent, bodyJson) else { return false }
        }
        return true
    }

    /// JSON equality where 1 and 1.0 are the same number and members may come in any order.
    static func sameJSON(_ a: JSONValue, _ b: JSONValue) -> Bool {
        switch (a, b) {
        case (.integer(let x), .double(let y)), (.double(let y), .integer(let x)):
            return Double(x) == y
        case (.array(let x), .array(let y)):
            return x.count == y.count && zip(x, y).allSatisfy { sameJSON($0, $1) }
        case (.object(let x), .object(let y)):
            return x.count == y.count && x.members.allSatisfy { member in y[member.key].map { sameJSON(member.value, $0) } ?? false }
        default:
            return a == b
        }
    }
}

/// A fault in place of an answer, failing as a real failure of that kind does (-32001).
enum StubFault: String, Sendable, CaseIterable {
    case reset, timeout, refused

    var error: TransferError {
        switch self {
        case .reset: TransferError(.reset, "stub fault: connection reset by peer")
        case .timeout: TransferError(.timeout, "stub fault: operation timed out")
        case .refused: TransferError(.connect, "stub fault: connection refused")
        }
    }
}

/// One canned answer.
struct StubResponse: Sendable {
    var status = 200
    var headers: [HTTPHeader] = []
    var body: [UInt8] = []
    var delayMs = 0
}

enum StubAnswer: Sendable {
    case respond(StubResponse)
    case fault(StubFault)

    var delayMs: Int {
        if case .respond(let response) = self { return response.delayMs }
        return 0
    }
}

/// One rule of a set: the match, the answers (one, or a sequence whose last repeats), how
/// many times it may match, and how many times it did.
struct Stub: Sendable {
    let id: String
    let set: String
    let match: StubMatch
    /// Grows while recordStubs records the same request again.
    var answers: [StubAnswer]
    var priority = 0
    /// At most this many matches; nil: any number.
    var times: Int?
    /// Shared by every copy of the stub: a hit is counted without changing the set's array
    /// of stubs, which searches outside the store's lock hold a copy of (`StubSearch`).
    private let counter = HitCounter()

    init(id: String, set: String, match: StubMatch, answers: [StubAnswer], priority: Int = 0, times: Int? = nil) {
        self.id = id
        self.set = set
        self.match = match
        self.answers = answers
        self.priority = priority
        self.times = times
    }

    var hits: Int { counter.value }

    /// Counts a match (under the store's lock, which decides who takes the answer).
    func countHit() {
        counter.add()
    }

    var exhausted: Bool { times.map { hits >= $0 } ?? false }

    /// The answer to the next matching request.
    var nextAnswer: StubAnswer { answers[min(hits, answers.count - 1)] }

    /// The stub nearest to a request no stub matched: the fewest differences (a used-up
    /// stub counts "times" as one more); on a tie, the one that would have been tried first.
    static func nearest(_ stubs: [Stub], to request: StubRequest) -> (stub: Stub, differences: [String])? {
        var best: (stub: Stub, differences: [String])?
        for stub in stubs { best = closer(best, stub, stub.match.differences(request)) }
        return best
    }

    /// `best`, or the stub with these differences (its "times" added when used up) if it is nearer.
    static func closer(_ best: (stub: Stub, differences: [String])?, _ stub: Stub, _ differences: [String])
        -> (stub: Stub, differences: [String])? {
        var differences = differences
        if stub.exhausted { differences.append("times") }
        return best == nil || differences.count < best!.differences.count ? (stub, differences) : best
    }
}

/// A stub's hit count: written under the store's lock, read anywhere.
final class HitCounter: Sendable {
    private let count = Atomic<Int>(0)

    var value: Int { count.load(ordering: .relaxed) }

    func add() {
        count.add(1, ordering: .relaxed)
    }
}

/// A request that no stub of its set matched, as getStubs reports it.
struct StubMiss: Sendable {
    let set: String
    let method: String
    let url: String
    let nearest: (stubID: String, differences: [String])?

    var nearestJSON: JSONValue {
        guard let nearest else { return .null }
        return ["stubId": .string(nearest.stubID), "differences": .array(nearest.differences.map(JSONValue.string))]
    }

    var json: JSONValue {
        ["set": .string(set), "method": .string(method), "url": .string(url), "nearest": nearestJSON]
    }

    /// The -32001 detail.
    var detail: String {
        guard let nearest else { return "no stub in set \"\(set)\" matches \(method) \(url) (the set has no stubs)" }
        return "no stub in set \"\(set)\" matches \(method) \(url); nearest: \(nearest.stubID), differs in \(nearest.differences.joined(separator: ", "))"
    }
}
