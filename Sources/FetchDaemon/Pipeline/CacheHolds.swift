import FetchEngine
import FoundationEssentials
import Glibc
import JSONRPC

/// The cache stage's holds, run on the blocking threads (SQLite and the body files are never
/// touched on the engine thread): a lookup that answers the attempt from the store, sends it
/// on with validators, or queues it behind an identical request in flight (collapsing,
/// `HTTPCache.lead`); and the step after a 304 or an error stale-if-error covers, answered
/// from the stored response.
extension CacheStage {
    /// stale-while-revalidate: the entry is served now and asked again in the background,
    /// through the limits of the attempt's host, at the job's priority.
    private static func revalidateInBackground(_ entry: CacheStore.Entry, _ attempt: Attempt, _ job: Job,
                                               _ cache: HTTPCache) {
        cache.revalidateInBackground(entry, request: attempt.request, varyKey: entry.varyKey,
                                     host: job.host(of: attempt), priority: job.spec.model.priority,
                                     maxPause: job.spec.retryPolicy.maxInterval)
    }

    func lookupHold(_ key: Key, _ mode: CacheMode, _ cache: HTTPCache, _ attempt: Attempt, _ job: Job) -> Hold {
        let once = PendingRelease()
        return Hold(
            start: { release in
                once.arm(release)
                cache.blocking.execute { self.lookUp(key, mode, cache, attempt, job, once) }
            },
            cancel: { error in once.release(.failure(error)) })
    }

    private func lookUp(_ key: Key, _ mode: CacheMode, _ cache: HTTPCache, _ attempt: Attempt, _ job: Job,
                               _ once: PendingRelease) {
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
                    Self.revalidateInBackground(entry, attempt, job, cache)
                }
                return substitute(entry, attempt, job, cache, reuse == .fresh ? .hit : .stale, once)
            } else if entry.bodyBytes <= attempt.request.maxBodyBytes {
                let body: [UInt8]
                switch Self.budgeted(entry, job, cache, again: { self.lookUp(key, mode, cache, attempt, job, once) }) {
                case .wait: return
                case .gone: return lookUp(key, mode, cache, attempt, job, once)
                case .body(let read): body = read
                }
                cache.store.touch(entry)
                let response = Self.served(entry, body: body, url: attempt.request.url, now: now)
                if reuse == .staleWhileRevalidate {
                    Self.revalidateInBackground(entry, attempt, job, cache)
                }
                answer(attempt, job, cache, response, reuse == .fresh ? .hit : .stale, once, entry: entry)
                return
            }
        }
        if mode == .onlyIfCached {
            return answer(attempt, job, cache, Self.gatewayTimeout(attempt.request.url), .miss, once)
        }
        let validating = toValidate
        let toNetwork: @Sendable (String?) -> Bool = { leads in
            once.release(.success(())) {
                if let validating { attempt.request.headers += CacheRules.conditionalHeaders(for: validating.stored) }
                job.withState(of: self) { state in
                    if let validating { state.validating = validating }
                    state.outcome = .miss
                    state.leads = leads
                }
            }
        }
        // Downloads are not collapsed: their answers are files, not bodies to share.
        guard mode == .default || mode == .forceCache, job.spec.kind == .fetch else {
            _ = toNetwork(nil)
            return
        }
        let collapse = Self.collapseKey(key, headers)
        let leader = cache.lead(collapse, seen: generation, or: { shared in
            if let shared, shared.body.count <= attempt.request.maxBodyBytes {
                var response = shared
                response.url = attempt.request.url
                response.exchange = []
                self.answer(attempt, job, cache, response, .collapsed, once)
            } else {
                _ = toNetwork(nil)
            }
        }, again: { self.lookUp(key, mode, cache, attempt, job, once) })
        // A leader cancelled meanwhile must not leave its followers waiting.
        if leader && !toNetwork(collapse) { cache.finishCollapse(collapse, sharing: nil) }
    }

    func serveHold(_ serve: Serve, _ cache: HTTPCache, _ attempt: Attempt, _ job: Job) -> Hold {
        let once = PendingRelease()
        return Hold(
            start: { release in
                once.arm(release)
                cache.blocking.execute { self.serveStored(serve, cache, attempt, job, once) }
            },
            cancel: { error in once.release(.failure(error)) })
    }

    /// After a 304 (the stored response freshened) or an error stale-if-error covers.
    private func serveStored(_ serve: Serve, _ cache: HTTPCache, _ attempt: Attempt, _ job: Job, _ once: PendingRelease) {
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
        let leads = job.state(of: self).leads
        if job.spec.kind == .download {
            return substitute(entry, attempt, job, cache, outcome, once)
        }
        let read = Self.budgeted(entry, job, cache, again: { self.serveStored(serve, cache, attempt, job, once) })
        if case .wait = read { return }
        guard case .body(let body) = read else {
            // The body went (evicted, purged): a plain request.
            once.release(.success(())) {
                job.withState(of: self) { state in
                    state.validating = nil
                    state.outcome = .miss
                }
            }
            return
        }
        let response = Self.served(entry, body: body, url: attempt.request.url, now: now)
        if let leads {
            let fresh = outcome == .revalidated
                && CacheRules.reuse(entry.stored, mode: .default, requestHeaders: attempt.request.headers, now: now) == .fresh
            job.withState(of: self) { $0.leads = nil }
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
    private func substitute(_ entry: CacheStore.Entry, _ attempt: Attempt, _ job: Job, _ cache: HTTPCache,
                                   _ outcome: CacheOutcome, _ once: PendingRelease) {
        once.release(.success(())) {
            job.withState(of: self) { state in
                state.used = entry
                state.outcome = outcome
                state.served = true
            }
            attempt.substitute = Substitute { attempt, _ in
                guard case .file(let target) = attempt.request.destination else {
                    return Substitute.Made(outcome: .failure(TransferError(.other, "a download without its file")))
                }
                guard let fd = cache.store.openBody(entry) else {
                    return Substitute.Made(outcome: .failure(TransferError(.other, "the stored answer is gone")))
                }
                defer { close(fd) }
                var response = Self.served(entry, body: [], url: attempt.request.url, now: cache.now())
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

    private func answer(_ attempt: Attempt, _ job: Job, _ cache: HTTPCache, _ response: HTTPResponse,
                               _ outcome: CacheOutcome, _ once: PendingRelease, entry: CacheStore.Entry? = nil) {
        let reserved = outcome == .collapsed || entry == nil || job.bodyBudget == nil ? 0 : response.body.count
        let taken = once.release(.success(())) {
            job.withState(of: self) { state in
                state.heldAnswer = .success(response)
                state.reserved = reserved
                state.used = entry
                state.outcome = outcome
                state.served = true
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
}
