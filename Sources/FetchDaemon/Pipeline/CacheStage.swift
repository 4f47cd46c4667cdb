import FetchEngine
import FoundationEssentials
import Glibc
import JSONRPC

/// The HTTP cache (docs/cache.md, RFC 9111 as a private cache; the rules are `CacheRules`).
/// After the credential stage (every header a rule adds is part of what an answer is stored
/// under) and before the host's limits (a hit takes no host slot). For a GET it may use:
///
/// - a hold that looks the request up on the blocking threads (SQLite and the body file are
///   never touched on the engine thread) and either answers it (`Attempt.answeredByHold`: a
///   hit, a stale answer, only-if-cached's 504), sends it on with validators, or queues it
///   behind an identical request in flight (collapsing);
/// - after the attempt, stores the answer (on the blocking threads), or on a 304 / an error
///   that stale-if-error covers, asks for the job's next step (`.next`), which this stage
///   answers from the stored response (freshened by the 304's headers);
/// - unsafe methods invalidate the URL and its same-origin Location / Content-Location.
///
/// Without --cache-dir (`cache` nil) it costs one comparison per attempt.
final class CacheStage: Stage {
    /// Where an answer is stored: the URL, and a digest of what makes it one user's
    /// (Authorization, a rule's headers, Cookie, the jar, a client certificate, the route to
    /// the server).
    struct Key: Sendable, Equatable {
        let url: String
        let partition: String
    }

    let cache: HTTPCache?

    init(cache: HTTPCache?) {
        self.cache = cache
    }

    func prepare(_ attempt: Attempt, _ job: Job) throws -> Preparation {
        let mode = job.spec.model.cache
        guard let cache else {
            // Nothing is ever stored: only-if-cached has nothing to use.
            return mode == .onlyIfCached ? .answer(.success(Self.gatewayTimeout(attempt.request.url))) : .proceed
        }
        if mode != .default { attempt.request.headers += CacheRules.modeHeaders(mode, existing: attempt.request.headers) }
        var state = job.pipeline.cache
        defer { job.pipeline.cache = state }
        state.served = false
        state.pending = nil
        if let serve = state.serveNext {
            state.serveNext = nil
            if case .refetch = serve {
                state.validating = nil
                return .proceed
            }
            return .hold(serveHold(serve, cache, attempt, job))
        }
        if let leads = state.leads {
            // A retry of the request others wait for: they go to the network themselves.
            state.leads = nil
            cache.finishCollapse(leads, sharing: nil)
        }
        state.validating = nil
        state.used = nil
        guard let key = Self.key(attempt, job, mode) else {
            state.key = nil
            state.outcome = .bypass
            return .proceed
        }
        state.key = key
        state.sentAt = cache.now()
        if mode == .reload {
            state.outcome = .miss
            return .proceed
        }
        return .hold(lookupHold(key, mode, cache, attempt, job))
    }

    func ended(_ attempt: Attempt, _ outcome: AttemptOutcome, _ job: Job) {
        guard let cache else { return }
        var state = job.pipeline.cache
        defer { job.pipeline.cache = state }
        if state.reserved > 0 {
            // A body read from the store is the answer's now, as a transfer's at its end.
            job.bodyBudget?.released(job.transferID, holding: state.reserved)
            state.reserved = 0
        }
        if state.served { return }
        let request = attempt.request
        let receivedAt = cache.now()
        guard case .success(let response) = outcome else {
            if let entry = state.validating, !(outcome.failureValue is JobCancelled),
               CacheRules.mayServeOnError(entry.stored, requestHeaders: request.headers, now: receivedAt) {
                state.pending = .stale(entry)
            } else if let leads = state.leads {
                state.leads = nil
                cache.finishCollapse(leads, sharing: nil)
            }
            return
        }
        if !CacheRules.safeMethods.contains(request.method.uppercased()) {
            cache.invalidate(CacheRules.invalidated(method: request.method, status: response.status, url: request.url,
                                                    responseHeaders: Array(response.headers)))
            return
        }
        guard let key = state.key else { return }
        if let entry = state.validating {
            if response.status == 304 {
                let headers = Array(response.headers)  // as Strings, once, for the cache's rules
                state.pending = CacheRules.notModifiedMatches(entry.stored, headers)
                    ? .revalidated(entry, headers, requestTime: state.sentAt, responseTime: receivedAt) : .refetch
                return
            }
            if CacheRules.isErrorForStaleIfError(response.status),
               CacheRules.mayServeOnError(entry.stored, requestHeaders: request.headers, now: receivedAt) {
                state.pending = .stale(entry)
                return
            }
        }
        // The headers as Strings, made once here for the cache's rules (a fetch that bypasses
        // the cache never makes them).
        let responseHeaders = Array(response.headers)
        let stored = StoredResponse(status: response.status, headers: CacheRules.storedHeaders(responseHeaders),
                                    requestTime: state.sentAt, responseTime: receivedAt)
        let varyNames = CacheRules.varyNames(responseHeaders)
        let storable = response.redirects == 0 && varyNames != nil
            && CacheRules.storable(status: response.status, requestHeaders: request.headers, responseHeaders: responseHeaders)
            && CacheRules.worthStoring(stored)
        if storable, let varyNames, job.spec.kind == .download {
            // Its body is a file, copied into the store once it has landed (jobEnded).
            if let written = response.download, written.wroteFile, !written.resumed {
                state.landing = Landing(key: key, varyKey: CacheRules.varyKey(names: varyNames, requestHeaders: request.headers),
                                        stored: stored, bytes: written.fileBytes, replacing: state.validating)
            }
        } else if storable, let varyNames {
            // Requests for it that come while it is written wait for it (then look it up).
            let leads = state.leads
            if let leads {
                state.leads = nil
                let shareable = CacheRules.reuse(stored, mode: .default, requestHeaders: request.headers, now: receivedAt) == .fresh
                cache.finishCollapse(leads, sharing: shareable ? response : nil, storing: true)
            }
            var done: (@Sendable () -> Void)? = nil
            if let leads { done = { cache.stored(leads) } }
            cache.store(key: key, varyKey: CacheRules.varyKey(names: varyNames, requestHeaders: request.headers), stored: stored,
                        body: response.body, replacing: state.validating, then: done)
        } else if let old = state.validating {
            // The new answer may not be kept: neither may the one it replaces.
            cache.blocking.execute { cache.store.remove(ids: [old.id]) }
        }
        if let leads = state.leads {
            state.leads = nil
            cache.finishCollapse(leads, sharing: nil)
        }
    }

    /// A 304 or an error covered by stale-if-error: the next step answers from the store.
    func judge(_ attempt: Attempt, _ outcome: AttemptOutcome, _ job: Job) -> Verdict {
        guard cache != nil, let pending = job.pipeline.cache.pending else { return .pass }
        job.pipeline.cache.pending = nil
        job.pipeline.cache.serveNext = pending
        return .next
    }

    func jobEnded(_ job: Job, _ answer: Result<JSONValue, any Error>) {
        guard let cache else { return }
        if let leads = job.pipeline.cache.leads {
            job.pipeline.cache.leads = nil
            cache.finishCollapse(leads, sharing: nil)
        }
        if let outcome = job.pipeline.cache.outcome { cache.count(outcome) }
        if let landing = job.pipeline.cache.landing, case .success(let result) = answer,
           let path = result.objectValue?["path"]?.stringValue, result.objectValue?["bytes"]?.integerValue == Int(landing.bytes) {
            job.pipeline.cache.landing = nil
            // A download is answered on the blocking threads: opened here, before the client
            // hears of it, so the file copied is the one downloaded (the checked open: a
            // regular file, not through a link).
            guard let fd = try? LocalFile.openForReading(path, followLinks: false) else { return }
            cache.store(key: landing.key, varyKey: landing.varyKey, stored: landing.stored, file: fd, bytes: landing.bytes,
                        replacing: landing.replacing)
        }
    }

    /// A download's answer to store once its file has landed.
    struct Landing: Sendable {
        let key: Key
        let varyKey: String
        let stored: StoredResponse
        let bytes: Int64
        let replacing: CacheStore.Entry?
    }

    // MARK: which requests

    /// The key a GET is stored under, or nil when the cache stays out of it: another method,
    /// an upload, a stub's answer, a body, the client's own conditional or Range
    /// request (WHATWG fetch makes those no-store), mode or directive no-store.
    static func key(_ attempt: Attempt, _ job: Job, _ mode: CacheMode) -> Key? {
        let request = attempt.request
        guard mode != .noStore, request.method == "GET", job.spec.kind != .upload, attempt.substitute == nil,
              job.pipeline.stubRecording == nil,
              request.body == .none, request.range == nil, case .memory = request.destination,
              !request.headers.contains(where: { h in CacheRules.conditionalFields.contains { h.name.caseInsensitiveEquals($0) } }),
              !CacheRules.RequestDirectives(request.headers).noStore else { return nil }
        return Key(url: CacheRules.primaryKey(request.url),
                   partition: partition(request, ruleHeaders: CredentialStage.ruleHeaders(of: attempt)))
    }

    /// A digest of what makes an answer one user's or one route's: an answer is reused only
    /// for requests with the same (protocol.md: the same Authorization, and every header an
    /// auth rule added). Only the digest is stored, never a credential.
    static func partition(_ request: HTTPRequest, ruleHeaders: [HTTPHeader] = []) -> String {
        var text = ""
        for name in ["Authorization", "Proxy-Authorization", "Cookie"] {
            for header in request.headers where header.name.caseInsensitiveEquals(name) { text += "\(name):\(header.value)\n" }
        }
        for header in ruleHeaders { text += "rule \(header.name.lowercased()):\(header.value)\n" }
        text += "jar:\(request.cookieJar ?? "")\ncert:\(request.certFile ?? "")\nkey:\(request.keyFile ?? "")\n"
        text += "unix:\(request.unixSocket ?? "")\nto:\(request.connectTo.joined(separator: ","))\nproxy:\(request.proxy ?? "-")\n"
        text += "aws:\(request.awsSigV4?.accessKeyID ?? "")\nremoved:\(request.removedHeaders.joined(separator: ","))\n"
        text += "tls:\(request.insecure ? 1 : 0):\(request.caFile ?? "")\n"
        var digest = SHA256()
        digest.update(Array(text.utf8))
        return digest.finishHex()
    }

    /// Requests that may share one transfer: the same key and the same request fields (which
    /// covers whatever the answer's Vary names).
    static func collapseKey(_ key: Key, _ headers: [HTTPHeader]) -> String {
        let fields = headers.map { $0.name.lowercased() + ":" + $0.value }.sorted().joined(separator: "\n")
        return key.url + "\n" + key.partition + "\n" + fields
    }

    // MARK: the holds (on the blocking threads)

    /// stale-while-revalidate: the entry is served now and asked again in the background,
    /// through the limits of the attempt's host, at the job's priority.
    private static func revalidateInBackground(_ entry: CacheStore.Entry, _ attempt: Attempt, _ job: Job,
                                               _ cache: HTTPCache) {
        cache.revalidateInBackground(entry, request: attempt.request, varyKey: entry.varyKey,
                                     host: HostLimitStage.host(attempt, job), priority: job.spec.model.priority,
                                     maxPause: job.spec.retryPolicy.maxInterval)
    }

    private func lookupHold(_ key: Key, _ mode: CacheMode, _ cache: HTTPCache, _ attempt: Attempt, _ job: Job) -> Hold {
        let once = ReleaseOnce()
        return Hold(
            start: { release in
                once.arm(release)
                cache.blocking.execute { Self.lookUp(key, mode, cache, attempt, job, once) }
            },
            cancel: { error in once.fire(.failure(error)) })
    }

    private static func lookUp(_ key: Key, _ mode: CacheMode, _ cache: HTTPCache, _ attempt: Attempt, _ job: Job,
                               _ once: ReleaseOnce) {
        let headers = attempt.request.headers
        let now = cache.now()
        let generation = cache.storeGeneration
        let found = cache.store.select(url: key.url, partition: key.partition, requestHeaders: headers)
        var toValidate: CacheStore.Entry? = nil
        if let entry = found {
            let reuse = CacheRules.reuse(entry.stored, mode: mode, requestHeaders: headers, now: now)
            if reuse == .validate {
                toValidate = entry
            } else if job.spec.kind == .download {
                cache.store.touch(entry)
                if reuse == .staleWhileRevalidate {
                    revalidateInBackground(entry, attempt, job, cache)
                }
                return substitute(entry, attempt, job, cache, reuse == .fresh ? .hit : .stale, once)
            } else if entry.bodyBytes <= attempt.request.maxBodyBytes {
                let body: [UInt8]
                switch budgeted(entry, job, cache, again: { Self.lookUp(key, mode, cache, attempt, job, once) }) {
                case .wait: return
                case .gone: return lookUp(key, mode, cache, attempt, job, once)
                case .body(let read): body = read
                }
                cache.store.touch(entry)
                let response = served(entry, body: body, url: attempt.request.url, now: now)
                if reuse == .staleWhileRevalidate {
                    revalidateInBackground(entry, attempt, job, cache)
                }
                answer(attempt, job, cache, response, reuse == .fresh ? .hit : .stale, once, entry: entry)
                return
            }
        }
        if mode == .onlyIfCached {
            return answer(attempt, job, cache, gatewayTimeout(attempt.request.url), .miss, once)
        }
        let validating = toValidate
        let toNetwork: @Sendable (String?) -> Bool = { leads in
            once.fire(.success(())) {
                if let validating {
                    attempt.request.headers += CacheRules.conditionalHeaders(for: validating.stored)
                    job.pipeline.cache.validating = validating
                }
                job.pipeline.cache.outcome = .miss
                job.pipeline.cache.leads = leads
            }
        }
        // Downloads are not collapsed: their answers are files, not bodies to share.
        guard mode == .default || mode == .forceCache, job.spec.kind == .fetch else {
            _ = toNetwork(nil)
            return
        }
        let collapse = collapseKey(key, headers)
        let leader = cache.lead(collapse, seen: generation, or: { shared in
            if let shared, shared.body.count <= attempt.request.maxBodyBytes {
                var response = shared
                response.url = attempt.request.url
                response.exchange = []
                answer(attempt, job, cache, response, .collapsed, once)
            } else {
                _ = toNetwork(nil)
            }
        }, again: { Self.lookUp(key, mode, cache, attempt, job, once) })
        // A leader cancelled meanwhile must not leave its followers waiting.
        if leader && !toNetwork(collapse) { cache.finishCollapse(collapse, sharing: nil) }
    }

    private func serveHold(_ serve: Serve, _ cache: HTTPCache, _ attempt: Attempt, _ job: Job) -> Hold {
        let once = ReleaseOnce()
        return Hold(
            start: { release in
                once.arm(release)
                cache.blocking.execute { Self.serveStored(serve, cache, attempt, job, once) }
            },
            cancel: { error in once.fire(.failure(error)) })
    }

    /// After a 304 (the stored response freshened) or an error stale-if-error covers.
    private static func serveStored(_ serve: Serve, _ cache: HTTPCache, _ attempt: Attempt, _ job: Job, _ once: ReleaseOnce) {
        let now = cache.now()
        var entry: CacheStore.Entry
        let outcome: CacheOutcome
        switch serve {
        case .revalidated(let validated, let notModified, let requestTime, let responseTime):
            entry = validated
            entry.stored = CacheRules.updated(validated.stored, with: notModified, requestTime: requestTime, responseTime: responseTime)
            cache.store.update(validated, to: entry.stored)
            outcome = .revalidated
        case .stale(let stale):
            entry = stale
            outcome = .stale
        case .refetch:
            return
        }
        let leads = job.pipeline.cache.leads
        if job.spec.kind == .download {
            return substitute(entry, attempt, job, cache, outcome, once)
        }
        let read = budgeted(entry, job, cache, again: { Self.serveStored(serve, cache, attempt, job, once) })
        if case .wait = read { return }
        guard case .body(let body) = read else {
            // The body went (evicted, purged): a plain request.
            once.fire(.success(())) {
                job.pipeline.cache.validating = nil
                job.pipeline.cache.outcome = .miss
            }
            return
        }
        let response = served(entry, body: body, url: attempt.request.url, now: now)
        if let leads {
            let fresh = outcome == .revalidated
                && CacheRules.reuse(entry.stored, mode: .default, requestHeaders: attempt.request.headers, now: now) == .fresh
            job.pipeline.cache.leads = nil
            cache.finishCollapse(leads, sharing: fresh ? response : nil)
        }
        answer(attempt, job, cache, response, outcome, once, entry: entry)
    }

    enum Budgeted {
        case wait, gone
        case body([UInt8])
    }

    /// A stored body, read within the client's memory budget as a received one is: over it,
    /// nothing is read and `again` runs (on the blocking threads) once the client has read
    /// enough; no thread waits meanwhile. `gone`: the body could not be read (its row is dropped).
    /// The bytes stay counted until the attempt ends (`ended`), as a transfer's do.
    static func budgeted(_ entry: CacheStore.Entry, _ job: Job, _ cache: HTTPCache,
                         again: @escaping @Sendable () -> Void) -> Budgeted {
        let size = Int(entry.bodyBytes)
        if let budget = job.bodyBudget, size > 0,
           !budget.reserve(size, for: job.transferID, resume: { cache.blocking.execute(again) }) {
            return .wait
        }
        guard let read = cache.store.readBody(entry) else {
            if size > 0 { job.bodyBudget?.released(job.transferID, holding: size) }
            return .gone
        }
        return .body(read)
    }

    /// A download answered from the store: where the transfer would start (once the part
    /// file stage has prepared its file), the stored body is streamed from its file through
    /// the download's own writer (so the digest and the landing are a transfer's), block by
    /// block. A body gone meanwhile fails the attempt (kind `other`), which the retry policy
    /// judges.
    private static func substitute(_ entry: CacheStore.Entry, _ attempt: Attempt, _ job: Job, _ cache: HTTPCache,
                                   _ outcome: CacheOutcome, _ once: ReleaseOnce) {
        once.fire(.success(())) {
            job.pipeline.cache.used = entry
            job.pipeline.cache.outcome = outcome
            job.pipeline.cache.served = true
            attempt.substitute = Substitute { attempt, _ in
                guard case .file(let target) = attempt.request.destination else {
                    return Substitute.Made(outcome: .failure(TransferError(.other, "a download without its file")))
                }
                guard let fd = cache.store.openBody(entry) else {
                    return Substitute.Made(outcome: .failure(TransferError(.other, "the stored answer is gone")))
                }
                defer { close(fd) }
                var response = served(entry, body: [], url: attempt.request.url, now: cache.now())
                switch KnownBody.write(contentsOf: fd, status: entry.stored.status, headers: response.headers, to: target) {
                case .success(let written):
                    response.download = written.download
                    response.body = written.errorBody
                    response.receivedBytes = entry.bodyBytes
                    return Substitute.Made(outcome: .success(response))
                case .failure(let error):
                    return Substitute.Made(outcome: .failure(error))
                }
            }
        }
    }

    private static func answer(_ attempt: Attempt, _ job: Job, _ cache: HTTPCache, _ response: HTTPResponse,
                               _ outcome: CacheOutcome, _ once: ReleaseOnce, entry: CacheStore.Entry? = nil) {
        let reserved = outcome == .collapsed || entry == nil || job.bodyBudget == nil ? 0 : response.body.count
        let taken = once.fire(.success(())) {
            attempt.answeredByHold = .success(response)
            job.pipeline.cache.reserved = reserved
            job.pipeline.cache.used = entry
            job.pipeline.cache.outcome = outcome
            job.pipeline.cache.served = true
            if cache.httpLog.isEnabled {
                var request = attempt.request
                request.recordsExchange = true
                var answered = response
                var hop = ExchangeHop(url: request.url, method: request.method)
                hop.requestHeaders = request.headers
                hop.httpVersion = response.httpVersion
                hop.status = response.status
                hop.responseHeaders = Array(response.headers)
                answered.exchange = [hop]
                job.record(Job.AttemptRecord(number: attempt.number, startedAt: Date(), request: request,
                                             outcome: .success(answered), ruleSecrets: attempt.ruleSecrets))
            }
        }
        // Cancelled meanwhile: what the body took goes back now.
        if !taken && reserved > 0 { job.bodyBudget?.released(job.transferID, holding: reserved) }
    }

    /// A stored response as the answer: its headers with the current Age (RFC 9111 5.1).
    static func served(_ entry: CacheStore.Entry, body: [UInt8], url: String, now: Double) -> HTTPResponse {
        var headers = entry.stored.headers.filter { !$0.name.caseInsensitiveEquals("Age") }
        headers.append(HTTPHeader("Age", String(Int(CacheRules.currentAge(entry.stored, now: now)))))
        return HTTPResponse(status: entry.stored.status, headers: ResponseHeaders(headers), url: url, body: body, redirects: 0,
                            httpVersion: "cache", timings: TransferTimings(), sentBytes: 0, receivedBytes: Int64(body.count))
    }

    /// only-if-cached with nothing usable (RFC 9111 5.2.1.7).
    static func gatewayTimeout(_ url: String) -> HTTPResponse {
        HTTPResponse(status: 504, headers: [], url: url, body: [], redirects: 0, httpVersion: "cache",
                     timings: TransferTimings(), sentBytes: 0, receivedBytes: 0)
    }

    /// What the next step serves from the store.
    enum Serve: Sendable {
        case revalidated(CacheStore.Entry, [HTTPHeader], requestTime: Double, responseTime: Double)
        case stale(CacheStore.Entry)
        /// The 304 was not for the stored response: ask again without validators.
        case refetch
    }
}

/// What the cache stage keeps between a job's attempts.
struct CacheState: Sendable {
    var key: CacheStage.Key?
    /// What the result's `cache` field says (nil: no cache).
    var outcome: CacheOutcome?
    /// The stored response the attempt's validators came from.
    var validating: CacheStore.Entry?
    /// When the attempt's request went (RFC 9111's request_time).
    var sentAt = 0.0
    /// Decided when the attempt ended, taken by `judge`; then served by the next step.
    var pending: CacheStage.Serve?
    var serveNext: CacheStage.Serve?
    /// The collapse key this job's transfer leads.
    var leads: String?
    /// The attempt was answered by the cache.
    var served = false
    /// A download's answer, stored when the job ends.
    var landing: CacheStage.Landing?
    /// Bytes of a body read from the store, counted in the client's budget until `ended`.
    var reserved = 0
    /// The stored response that answered, or that the validators came from.
    var used: CacheStore.Entry?

    /// HAR's cache object: what the cache did (`comment`), and the stored response it used
    /// (`_storedAt`, `_eTag`, `_expires` as HAR's beforeRequest would name them).
    var har: JSONObject? {
        guard let outcome else { return nil }
        var object: JSONObject = ["comment": .string(outcome.rawValue)]
        if let entry = used ?? validating {
            let stored = entry.stored
            let expires = stored.responseTime + CacheRules.freshnessLifetime(stored)
                - CacheRules.currentAge(stored, now: stored.responseTime)
            object["_storedAt"] = .string(ISO8601Format.string(Date(timeIntervalSince1970: stored.responseTime)))
            object["_expires"] = .string(ISO8601Format.string(Date(timeIntervalSince1970: expires)))
            if let etag = stored.etag { object["_eTag"] = .string(etag) }
        }
        return object
    }
}

/// A hold's release that happens once: a cancel, or the hold's own work (whose changes to the
/// attempt and job are made only when it wins, under the lock).
final class ReleaseOnce: Sendable {
    private let pending = Locked<(@Sendable (Result<Void, any Error>) -> Void)?>(nil)

    func arm(_ release: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        pending.withLock { $0 = release }
    }

    @discardableResult
    func fire(_ result: Result<Void, any Error>, apply: () -> Void = {}) -> Bool {
        let release = pending.withLock { p -> (@Sendable (Result<Void, any Error>) -> Void)? in
            guard let release = p else { return nil }
            p = nil
            apply()
            return release
        }
        release?(result)
        return release != nil
    }
}
