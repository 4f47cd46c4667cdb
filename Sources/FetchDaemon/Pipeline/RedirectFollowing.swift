import FetchEngine

/// Redirects the daemon follows itself, one hop per step of the job, for a request that
/// carries a credential an auth rule added: libcurl, following them, would send every header
/// of it but `Authorization` and `Cookie` on to another origin. As a step of its own, each
/// hop passes the whole pipeline: the auth rule of the hop's own origin applies (scheme, host
/// and port), nothing of another's, and so do the hop host's limits, the jar and the HTTP log.
///
/// The hops follow libcurl's rules (curl -L), so a request is sent the same with a rule as
/// without: 301, 302 and 303 send no body again and turn a POST into a GET; 307 and 308 keep
/// the method and the body; past `maxRedirects` the job fails with `tooManyRedirects`, and a
/// Location of another scheme than http or https is refused as libcurl refuses it. The
/// client's own `Authorization`, `Cookie` and `Host` go only to the job's own origin.
///
/// Pure: the request and the answer in, the next hop out. `RedirectStage` keeps it for a job,
/// sends each step to the hop and judges each answer.
struct RedirectFollowing: Sendable, Equatable {
    /// Where the job's steps go while it follows a redirect.
    struct Hop: Sendable, Equatable {
        var url: String
        var method: String
        /// A 301, 302 or 303 on the way: the body is not sent again.
        var dropsBody: Bool
    }

    /// What an answer asks for.
    enum Next: Sendable, Equatable {
        /// Not a redirect to follow here: the answer stands.
        case stay
        /// The job's next step goes to `hop`.
        case follow
        /// The job fails, as libcurl would have failed it.
        case fail(TransferError)
    }

    static let statuses: Set<Int> = [301, 302, 303, 307, 308]
    /// The client's own headers that go only to the job's own origin (libcurl's rule for them).
    static let originBoundHeaders = ["Authorization", "Cookie", "Host"]

    /// How many redirects the daemon may follow for the job; nil: libcurl follows them.
    private(set) var limit: Int?
    /// The hop the job's steps go to now; nil: the job's own URL.
    private(set) var hop: Hop?
    /// Redirects followed so far (added to the answer's `redirects`).
    private(set) var followed = 0
    /// What the hops before the current one sent and took: the answer's `exchange`, HTTP
    /// logs' masks (the secrets each hop's rule added) and the time they took.
    private(set) var earlierExchange: [ExchangeHop] = []
    private(set) var earlierSecrets: [String] = []
    private(set) var earlierMicroseconds: Int64 = 0

    var isIdle: Bool { self == RedirectFollowing() }

    /// The request's redirects become the daemon's to follow (up to its `maxRedirects`):
    /// libcurl follows none of them.
    mutating func takeOver(_ request: inout HTTPRequest) {
        takeOver(limit: request.maxRedirects)
        request.maxRedirects = 0
    }

    /// The job's redirects become the daemon's to follow, up to `limit` (the first call sets it).
    mutating func takeOver(limit: Int) {
        if self.limit == nil { self.limit = limit }
    }

    /// A step's request: the job's own, sent to the current hop when there is one.
    func apply(to request: inout HTTPRequest) {
        guard let hop else { return }
        if !Self.sameOrigin(request.url, hop.url) {
            request.headers.removeAll { header in Self.originBoundHeaders.contains { header.name.caseInsensitiveEquals($0) } }
        }
        request.url = hop.url
        request.method = hop.method
        if hop.dropsBody { request.body = .none }
    }

    /// The answer `answer` to `request` (which carried the rule's `secrets`): followed when it
    /// is a redirect and the daemon follows the job's redirects.
    mutating func redirect(_ answer: HTTPResponse, of request: HTTPRequest, secrets: [String]) -> Next {
        guard let limit, limit > 0, Self.statuses.contains(answer.status),
              let location = answer.headers.last(named: "Location"),
              let target = RequestURL.resolve(location, against: request.url) else { return .stay }
        guard followed < limit else {
            var error = TransferError(.tooManyRedirects, "Maximum (\(limit)) redirects followed")
            error.curlCode = 47  // CURLE_TOO_MANY_REDIRECTS
            return .fail(error)
        }
        guard let next = try? RequestURL(target) else {
            // As libcurl reports a redirect to a protocol it is not allowed to follow.
            let scheme = target.prefix { $0 != ":" }.lowercased()
            var error = TransferError(.protocol, "Protocol \"\(scheme)\" not supported or disabled in libcurl")
            error.curlCode = 1  // CURLE_UNSUPPORTED_PROTOCOL
            return .fail(error)
        }
        let resends = answer.status == 307 || answer.status == 308
        hop = Hop(url: next.text, method: !resends && request.method == "POST" ? "GET" : request.method,
                  dropsBody: !resends || (hop?.dropsBody ?? false))
        followed += 1
        earlierExchange += answer.exchange
        earlierSecrets += secrets
        earlierMicroseconds += max(0, answer.timings.total)
        return .follow
    }

    /// The final answer as libcurl would have given it: every redirect counted, every hop's
    /// exchange, the hops' time in `redirect` and `total` (its phase times are the last hop's,
    /// as libcurl's are).
    func completed(_ response: HTTPResponse) -> HTTPResponse {
        guard followed > 0 else { return response }
        var response = response
        response.redirects += followed
        if !earlierExchange.isEmpty { response.exchange = earlierExchange + response.exchange }
        response.timings.redirect += earlierMicroseconds
        response.timings.total += earlierMicroseconds
        return response
    }

    /// Scheme, host and port alike (an unparsable URL is no origin's).
    static func sameOrigin(_ a: String, _ b: String) -> Bool {
        guard let a = try? RequestURL(a), let b = try? RequestURL(b) else { return false }
        return a.scheme == b.scheme && a.host == b.host && a.port == b.port
    }
}
