import FetchEngine
import FoundationEssentials
import Glibc
import Synchronization

/// The daemon's one HTTP cache (docs/cache.md): the store on disk, the counters getCacheStats
/// shows, the requests in flight that identical ones are collapsed onto, and the background
/// revalidations of stale-while-revalidate. Owned by the Daemon, handed to `CacheStage` and
/// the cache methods. Every disk access runs on the blocking threads, never on the engine's.
final class HTTPCache: Sendable {
    let store: CacheStore
    let blocking: WorkerThreads
    let engine: HTTPEngine
    /// The hosts' limits, which background revalidations wait for as attempts do.
    let gate: HostGate
    let log: Logger
    /// Answers from the store are recorded for HTTP logs when they are on.
    let httpLog: HTTPLog
    /// Seconds since 1970 (RFC 9111's times are the wall clock's; injected for tests).
    let now: @Sendable () -> Double

    private let counters = Locked(Counters())
    private let inFlight = Locked<[String: Flight]>([:])
    private let revalidating = Locked<Set<Int64>>([])
    private let background = Locked(Background())
    private let transferIDs = Atomic<UInt64>(3 << 61)
    /// Counts the stores that have finished writing: a lookup that missed compares it with
    /// what it read before looking, so a store finishing in between is not missed (`lead`).
    private let storesFinished = Atomic<UInt64>(0)
    /// The purges of the last five minutes, with when each came: an answer is written to the
    /// store after it was sent, so a purge its client sends at once can come first; a store
    /// that lands after a purge of its URL made after its answer came removes what it wrote.
    private let purges = Locked<[(at: Double, url: String?, prefix: String?)]>([])

    /// The background revalidations, waiting for their host or running, so that a shutdown
    /// cancels them (`stopBackground`) and none starts once it has begun.
    private struct Background {
        var stopping = false
        var waiting: [UInt64: HostScheduler.Ticket] = [:]
        var running: Set<UInt64> = []
    }

    struct Counters: Sendable {
        var hits = 0, misses = 0, revalidated = 0, stale = 0, collapsed = 0, bypassed = 0
    }

    /// A collapsed request waiting for the one in flight: `done` is called once, with the
    /// response it may share (a hit for the waiter) or nil (the waiter goes to the network).
    typealias Follower = @Sendable (HTTPResponse?) -> Void

    /// A collapse key's request in flight, or its answer being written to the store (then a
    /// request for it waits for the write and looks up again: it finds what was stored).
    private enum Flight {
        case transfer([Follower])
        case storing([@Sendable () -> Void])
    }

    init(store: CacheStore, blocking: WorkerThreads, engine: HTTPEngine, gate: HostGate, log: Logger, httpLog: HTTPLog,
         now: @escaping @Sendable () -> Double = { Date().timeIntervalSince1970 }) {
        self.store = store
        self.blocking = blocking
        self.engine = engine
        self.gate = gate
        self.log = log
        self.httpLog = httpLog
        self.now = now
    }

    /// The daemon's cache, or nil without --cache-dir (or with --no-cache).
    static func open(options: DaemonOptions, environment: [String: String], blocking: WorkerThreads, engine: HTTPEngine,
                     gate: HostGate, log: Logger, httpLog: HTTPLog) throws -> HTTPCache? {
        guard let (directory, isDefault) = options.cacheDirectory(environment: environment) else { return nil }
        do {
            // mkdir -p of what is above it, 0700 as XDG asks of ~/.cache.
            var prefix = ""
            for part in PathText.directory(of: directory).split(separator: "/") {
                prefix += "/" + part
                mkdir(prefix, 0o700)
            }
            try SocketPath.preparePrivateDirectory(directory, uid: getuid(), what: "cache directory",
                                                   fix: "remove it, or choose another directory with --cache-dir")
            let store: CacheStore
            do {
                store = try CacheStore(directory: directory, maxBytes: options.cacheMaxBytes)
            } catch {
                throw StartupError("cannot open the HTTP cache in \(directory): \(error)")
            }
            let counts = store.counts
            log.info("HTTP cache in \(directory): \(counts.entries) response(s), \(counts.bytes) bytes")
            return HTTPCache(store: store, blocking: blocking, engine: engine, gate: gate, log: log, httpLog: httpLog)
        } catch where isDefault {
            // The default place (nobody asked for it) not usable: run without a cache, and say so.
            log.warning("no HTTP cache: \(error) (--cache-dir DIR to choose one, --no-cache to say none)")
            return nil
        }
    }

    func count(_ outcome: CacheOutcome) {
        counters.withLock { c in
            switch outcome {
            case .hit: c.hits += 1
            case .miss: c.misses += 1
            case .revalidated: c.revalidated += 1
            case .stale: c.stale += 1
            case .collapsed: c.collapsed += 1
            case .bypass: c.bypassed += 1
            }
        }
    }

    var stats: (counts: Counters, entries: Int, bytes: Int64) {
        let c = counters.withLock { $0 }
        let stored = store.counts
        return (c, stored.entries, stored.bytes)
    }

    // MARK: collapsing

    /// What `lead` compares with: read it before the store is looked up.
    var storeGeneration: UInt64 { storesFinished.load(ordering: .acquiring) }

    /// Joins the transfer in flight for `key`, or becomes it: true for the leader (it goes to
    /// the network and must call `finishCollapse`), false when `follower` was queued, or
    /// (the answer is being stored) `again` will run once it is stored, or (a store finished
    /// since `seen`, which the lookup before may have missed) `again` runs now.
    func lead(_ key: String, seen: UInt64, or follower: @escaping Follower, again: @escaping @Sendable () -> Void) -> Bool {
        let (leader, lookAgain) = inFlight.withLock { map -> (Bool, Bool) in
            switch map[key] {
            case nil:
                if storesFinished.load(ordering: .acquiring) != seen { return (false, true) }
                map[key] = .transfer([])
                return (true, false)
            case .transfer(let followers)?:
                map[key] = .transfer(followers + [follower])
                return (false, false)
            case .storing(let waiting)?:
                map[key] = .storing(waiting + [again])
                return (false, false)
            }
        }
        if lookAgain { again() }
        return leader
    }

    /// The leader is done: its waiters get its response if they may share it, else nil.
    /// `storing`: its answer is being written; until `stored(key)`, newcomers wait for it.
    func finishCollapse(_ key: String, sharing response: HTTPResponse?, storing: Bool = false) {
        let followers = inFlight.withLock { map -> [Follower] in
            guard case .transfer(let followers)? = map.removeValue(forKey: key) else { return [] }
            if storing { map[key] = .storing([]) }
            return followers
        }
        for follower in followers { follower(response) }
    }

    /// The answer of `key` is in the store (or could not be put there).
    func stored(_ key: String) {
        let waiting = inFlight.withLock { map -> [@Sendable () -> Void] in
            guard case .storing(let waiting)? = map[key] else { return [] }
            map[key] = nil
            return waiting
        }
        for again in waiting { blocking.execute(again) }
    }

    // MARK: storing (on the blocking threads)

    /// A purge of `url`, of the URLs under `prefix`, or (neither) of everything, noted before
    /// it runs.
    func notePurge(url: String?, prefix: String?) {
        let at = now()
        purges.withLock { list in
            list.removeAll { $0.at < at - 300 }
            list.append((at, url, prefix))
        }
    }

    /// Whether a purge that covers `url` came after `time` (an answer's responseTime).
    private func purgedAfter(_ time: Double, url: String) -> Bool {
        purges.withLock { list in
            list.contains { purge in
                guard purge.at >= time else { return false }
                if let one = purge.url { return one == url }
                if let prefix = purge.prefix { return url.unicodeScalars.starts(with: prefix.unicodeScalars) }
                return true
            }
        }
    }

    /// After a store: what it wrote goes again when a purge of its URL came meanwhile.
    private func dropIfPurged(_ key: CacheStage.Key, _ stored: StoredResponse) {
        if purgedAfter(stored.responseTime, url: key.url) { _ = store.remove(urls: [key.url]) }
    }

    /// Writes the answer's body and stores it (replacing the variant with the same Vary key).
    func store(key: CacheStage.Key, varyKey: String, stored: StoredResponse, body: [UInt8],
               replacing old: CacheStore.Entry?, then done: (@Sendable () -> Void)? = nil) {
        blocking.execute { [self, store, log] in
            defer {
                storesFinished.add(1, ordering: .releasing)
                done?()
            }
            do {
                let writer = try store.newBody()
                writer.write(body)
                if store.insert(url: key.url, partition: key.partition, varyKey: varyKey, stored: stored, body: writer) == nil,
                   let old {
                    // Too large to keep now: the older answer must not outlive it.
                    store.remove(ids: [old.id])
                }
                dropIfPurged(key, stored)
            } catch {
                log.error("cache: cannot store \(URLRedaction.redactURLs(in: key.url)): \(error)")
            }
        }
    }

    /// A landed download's file (opened already: a file renamed over it later is not what
    /// was downloaded) copied into the store, then closed; stored only when it has the size
    /// the download had.
    func store(key: CacheStage.Key, varyKey: String, stored: StoredResponse, file: Int32, bytes: Int64,
               replacing old: CacheStore.Entry?) {
        blocking.execute { [self, store, log] in
            defer {
                close(file)
                storesFinished.add(1, ordering: .releasing)
            }
            do {
                let writer = try store.newBody()
                writer.copy(from: file)
                guard writer.bytes == bytes else { return writer.discard() }
                if store.insert(url: key.url, partition: key.partition, varyKey: varyKey, stored: stored, body: writer) == nil,
                   let old {
                    store.remove(ids: [old.id])
                }
                dropIfPurged(key, stored)
            } catch {
                log.error("cache: cannot store \(URLRedaction.redactURLs(in: key.url)): \(error)")
            }
        }
    }

    func invalidate(_ urls: [String]) {
        guard !urls.isEmpty else { return }
        blocking.execute { [store] in store.remove(urls: urls) }
    }

    // MARK: stale-while-revalidate

    /// One conditional request in the background for a stale entry served now; its answer
    /// updates (304) or replaces (200) the entry. At most one per entry at a time. It waits
    /// for its host's limits as the job's own attempt would (at `priority`), and a 429 or 503
    /// with Retry-After pauses the host, for at most `maxPause` seconds.
    func revalidateInBackground(_ entry: CacheStore.Entry, request: HTTPRequest, varyKey: String, host: HostKey,
                                priority: Int, maxPause: Double) {
        guard revalidating.withLock({ $0.insert(entry.id).inserted }) else { return }
        // The entry may have been read before another revalidation updated it and left: the
        // store then holds the newer answer, and this one is not asked again.
        if let current = store.variants(url: entry.url, partition: entry.partition).first(where: { $0.id == entry.id }),
           current.stored != entry.stored {
            _ = revalidating.withLock { $0.remove(entry.id) }
            return
        }
        var conditional = request
        conditional.headers.removeAll { h in CacheRules.conditionalFields.contains { h.name.caseInsensitiveEquals($0) } }
        conditional.headers += CacheRules.conditionalHeaders(for: entry.stored)
        conditional.bodyBudget = nil
        conditional.recordsExchange = false
        conditional.destination = .memory
        let ticket = HostScheduler.Ticket(id: transferIDs.add(1, ordering: .relaxed).newValue, host: host, priority: priority)
        guard background.withLock({ b in
            if !b.stopping { b.waiting[ticket.id] = ticket }
            return !b.stopping
        }) else {
            _ = revalidating.withLock { $0.remove(entry.id) }
            return
        }
        gate.admit(ticket) { [self, conditional] admitted in
            // Admitted as the daemon stops: the slot goes back and nothing is sent.
            let goes = background.withLock { b in
                b.waiting[ticket.id] = nil
                if admitted && !b.stopping { b.running.insert(ticket.id) }
                return admitted && !b.stopping
            }
            guard goes else {
                if admitted { gate.finished(ticket) }
                _ = revalidating.withLock { $0.remove(entry.id) }
                return
            }
            revalidate(entry, conditional, varyKey: varyKey, ticket: ticket, maxPause: maxPause)
        }
    }

    /// The daemon stops: no background revalidation starts from now on, those waiting for
    /// their host leave its queue, and those running are cancelled. Returns how many there were.
    @discardableResult
    func stopBackground() -> Int {
        let (waiting, running) = background.withLock { b in
            b.stopping = true
            return (Array(b.waiting.values), Array(b.running))
        }
        for ticket in waiting { gate.cancel(ticket) }
        for id in running { engine.cancel(id) }
        return waiting.count + running.count
    }

    /// The revalidation, once its host has taken it.
    private func revalidate(_ entry: CacheStore.Entry, _ conditional: HTTPRequest, varyKey: String,
                            ticket: HostScheduler.Ticket, maxPause: Double) {
        let sentHeaders = conditional.headers
        let sentAt = now()
        do {
            try engine.start(conditional, id: ticket.id) { [self] outcome in
                let receivedAt = now()
                _ = background.withLock { $0.running.remove(ticket.id) }
                if case .success(let response) = outcome { _ = gate.followServer(response.headers, host: ticket.host, sharedHost: false) }
                gate.finished(ticket)
                if case .success(let response) = outcome,
                   let pause = gate.pauseForRetryAfter(response.status, response.headers, host: ticket.host,
                                                       sharedHost: false, maxSeconds: maxPause) {
                    log.info("pausing \(ticket.host) for \(pause) s: status \(response.status) with Retry-After")
                }
                blocking.execute { [self] in
                    defer { _ = revalidating.withLock { $0.remove(entry.id) } }
                    guard case .success(let response) = outcome else { return }
                    let key = CacheStage.Key(url: entry.url, partition: entry.partition)
                    let headers = Array(response.headers)  // as Strings, once, for the cache's rules
                    if response.status == 304 {
                        guard CacheRules.notModifiedMatches(entry.stored, headers) else { return }
                        store.update(entry, to: CacheRules.updated(entry.stored, with: headers,
                                                                   requestTime: sentAt, responseTime: receivedAt))
                    } else if response.redirects == 0,
                              CacheRules.storable(status: response.status, requestHeaders: sentHeaders,
                                                  responseHeaders: headers) {
                        let stored = StoredResponse(status: response.status, headers: CacheRules.storedHeaders(headers),
                                                    requestTime: sentAt, responseTime: receivedAt)
                        self.store(key: key, varyKey: varyKey, stored: stored, body: response.body, replacing: entry)
                    }
                }
            }
        } catch {
            _ = background.withLock { $0.running.remove(ticket.id) }
            gate.finished(ticket)
            _ = revalidating.withLock { $0.remove(entry.id) }
        }
    }
}

/// Errors of the cache methods.
enum CacheError: Error {
    /// The daemon runs without a cache (no --cache-dir).
    case disabled
    /// The index could not be read or written.
    case store(path: String, detail: String)
}
