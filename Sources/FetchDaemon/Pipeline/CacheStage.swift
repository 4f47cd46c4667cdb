import FetchEngine
import FoundationEssentials
import Glibc
import JSONRPC

/// The HTTP cache (docs/cache.md, RFC 9111 as a private cache; the rules are `CacheRules`).
/// After the credential stage (every header a rule adds is part of what an answer is stored
/// under) and before the host's limits (a hit takes no host slot). For a GET it may use:
///
/// - a hold that looks the request up on the blocking threads (SQLite and the body file are
///   never touched on the engine thread) and either answers it (`answerAfterHold`: a hit, a
///   stale answer, only-if-cached's 504), sends it on with validators, or queues it behind an
///   identical request in flight (collapsing);
/// - after the attempt, stores the answer (on the blocking threads), or on a 304 / an error
///   that stale-if-error covers, asks for the job's next step (`.next`), which this stage
///   answers from the stored response (freshened by the 304's headers);
/// - unsafe methods invalidate the URL and its same-origin Location / Content-Location.
///
/// Without --cache-dir (`cache` nil) it costs one comparison per attempt.
final class CacheStage: Stage {
    typealias State = CacheState

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
        // Read, changed and written back by this step alone (the holds start after it).
        var state = job.state(of: self)
        defer { job.withState(of: self) { $0 = state } }
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
        var state = job.state(of: self)
        defer { job.withState(of: self) { $0 = state } }
        // What the answer and the HTTP log say the cache did: this attempt's.
        let (didWhat, entry) = (state.outcome, (state.used ?? state.validating)?.stored)
        job.updateReport { report in
            report.cache = didWhat
            report.cacheEntry = entry
        }
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
        guard cache != nil else { return .pass }
        let next = job.withState(of: self) { state -> Bool in
            guard let pending = state.pending.take() else { return false }
            state.serveNext = pending
            return true
        }
        return next ? .next : .pass
    }

    /// What the lookup or the serving step found: the attempt ends with it.
    func answerAfterHold(_ attempt: Attempt, _ job: Job) -> AttemptOutcome? {
        guard cache != nil else { return nil }
        return job.withState(of: self) { $0.heldAnswer.take() }
    }


    func jobEnded(_ job: Job, _ ending: JobEnding) {
        guard let cache else { return }
        let (leads, outcome, landing) = job.withState(of: self) { state in
            (state.leads.take(), state.outcome, state.landing.take())
        }
        if let leads { cache.finishCollapse(leads, sharing: nil) }
        if let outcome { cache.count(outcome) }
        if let landing, case .finished(_, let landed?) = ending, landed.bytes == landing.bytes {
            // A download is answered on the blocking threads: opened here, before the client
            // hears of it, so the file copied is the one downloaded (the checked open: a
            // regular file, not through a link).
            guard let fd = try? LocalFile.openForReading(landed.path, followLinks: false) else { return }
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
              !attempt.networkOnly,
              request.body == .none, request.range == nil, case .memory = request.destination,
              !request.headers.contains(where: { h in CacheRules.conditionalFields.contains { h.name.caseInsensitiveEquals($0) } }),
              !CacheRules.RequestDirectives(request.headers).noStore else { return nil }
        return Key(url: CacheRules.primaryKey(request.url),
                   partition: partition(request, ruleHeaders: attempt.secretHeaders))
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

    /// What the next step serves from the store.
    enum Serve: Sendable {
        case revalidated(CacheStore.Entry, [HTTPHeader], requestTime: Double, responseTime: Double)
        case stale(CacheStore.Entry)
        /// The 304 was not for the stored response: ask again without validators.
        case refetch
    }
}
