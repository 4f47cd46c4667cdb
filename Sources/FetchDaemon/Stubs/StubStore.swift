import FetchEngine
import FoundationEssentials
import JSONRPC

/// Every stub set, in memory only: named sets of stubs, each set's mode for misses, and the
/// last misses over all sets. Owned by the Daemon and handed to the stub stage and the stub
/// methods; matching, hit counts and sequences happen under one lock, so two requests never
/// take the same answer of a sequence or the last of a stub's `times`.
final class StubStore: Sendable {
    /// Stubs one set may hold; addStub past it is refused with -32005.
    static let maxPerSet = 10_000
    /// Misses kept for getStubs, over all sets.
    static let keptMisses = 100
    /// The answers' bodies of every stub together (bodyFile can bring 64 MiB each); addStub
    /// or loadStubs past it is refused with -32005.
    static let maxBodyBytes = 512 << 20
    let maxBodyBytes: Int

    /// What a set does with a request none of its stubs matches.
    enum OnMiss: String, Sendable, CaseIterable {
        case error, network
    }

    /// The set of a request that names none: "default" for a daemon started with `--stubs`
    /// or `--offline`; nil otherwise, and such requests skip stubs at no cost.
    let implicitSet: String?
    /// `--offline`: a miss is always a stubMiss, whatever the set's mode.
    let offline: Bool

    private struct StubSet {
        /// In the order they are tried: higher priority first, then the earlier stub.
        var stubs: [Stub] = []
        var onMiss = OnMiss.error
        /// recordStubs: misses go to the network and are recorded.
        var recording: StubRecording?
        /// The states of the set's URL patterns together: what a byte of a URL can cost a
        /// search of the set (`searchesAside`).
        var patternStates = 0
    }

    private struct State {
        var sets: [String: StubSet] = [:]
        var nextID = 1
        /// The answers' bodies held, over all sets.
        var bodyBytes = 0
        /// The newest last.
        var misses: [StubMiss] = []
        /// Every hit and miss since start, over all sets (metrics).
        var hitCount = 0, missCount = 0
    }

    private let state = Locked(State())
    /// Puts a stubbed answer's cookies in the request's jar (the engine's jars).
    let storeCookies: @Sendable (_ cookies: [Cookie], _ jar: String) -> Void

    init(implicitSet: String? = nil, offline: Bool = false, maxBodyBytes: Int = StubStore.maxBodyBytes,
         storeCookies: @escaping @Sendable ([Cookie], String) -> Void = { _, _ in }) {
        self.maxBodyBytes = maxBodyBytes
        self.implicitSet = implicitSet ?? (offline ? "default" : nil)
        self.offline = offline
        self.storeCookies = storeCookies
    }

    enum Decision: Sendable {
        /// This stub answers (its hit is counted).
        case answer(StubAnswer, stubID: String)
        /// Nothing matched: the request fails with stubMiss.
        case miss(StubMiss)
        /// Nothing matched, and the set sends misses to the network.
        case network(StubMiss)
        /// Nothing matched; the set records what the network answers.
        case record(StubMiss, StubRecording)
    }

    /// Finds the stub that answers the request, counting its hit; else records the miss. The
    /// stubs are searched outside the store's lock (`StubSearch`), here and now: see
    /// `searchesAside` for a search that may take long.
    func decide(set name: String, _ request: StubRequest) -> Decision {
        var search = beginSearch(set: name, request)
        while true {
            var budget = Int.max
            if let step = search.advance(budget: &budget), let decision = conclude(step, of: search) { return decision }
        }
    }

    /// A search of the set as it is now.
    func beginSearch(set name: String, _ request: StubRequest) -> StubSearch {
        StubSearch(set: name, request: request, stubs: state.withLock { $0.sets[name]?.stubs ?? [] })
    }

    /// What a step of a search decides: a candidate answers if it is still in the set and
    /// not used up (its hit counted here, under the lock, so two requests never take the same
    /// answer of a sequence or the last of its `times`), else the search goes on (nil); a
    /// miss is recorded, and the set says where it goes.
    func conclude(_ step: StubSearch.Step, of search: StubSearch) -> Decision? {
        switch step {
        case .candidate(let candidate, let at):
            return state.withLock { s -> Decision? in
                guard let stubs = s.sets[search.set]?.stubs,
                      let stub = stubs.indices.contains(at) && stubs[at].id == candidate.id ? stubs[at]
                          : stubs.first(where: { $0.id == candidate.id }),
                      !stub.exhausted else { return nil }
                let answer = stub.nextAnswer
                stub.countHit()
                s.hitCount += 1
                return .answer(answer, stubID: stub.id)
            }
        case .missed(let nearest):
            let miss = StubMiss(set: search.set, method: search.request.method, url: search.request.url, nearest: nearest)
            return state.withLock { s in
                s.misses.append(miss)
                s.missCount += 1
                if s.misses.count > Self.keptMisses { s.misses.removeFirst(s.misses.count - Self.keptMisses) }
                if !offline, let recording = s.sets[search.set]?.recording { return .record(miss, recording) }
                let toNetwork = !offline && s.sets[search.set]?.onMiss == .network
                return toNetwork ? .network(miss) : .miss(miss)
            }
        }
    }

    /// Steps a search may take on the thread that prepares the request (a step is about 10 ns
    /// in a release build: at most 0.2 ms): a set whose URL patterns could take more, for this
    /// URL, is searched on the store's own thread (`decideAside`).
    static let inlineSearchSteps = 20_000

    /// Whether searching the set for this request could take more than `inlineSearchSteps`:
    /// every pattern once to find a stub, and once more for the nearest of a miss.
    func searchesAside(set name: String, _ request: StubRequest) -> Bool {
        let states = state.withLock { $0.sets[name]?.patternStates ?? 0 }
        return states > 0 && 2 * states * (request.url.utf8.count + 1) > Self.inlineSearchSteps
    }

    /// `decide` on the store's matching thread (`StubMatchingThread`), in turns with the other
    /// searches there; `done` is called there, unless `cancelled` said to stop.
    func decideAside(set name: String, _ request: StubRequest, cancelled: @escaping @Sendable () -> Bool,
                     done: @escaping @Sendable (Decision) -> Void) {
        let search = AsideSearch(beginSearch(set: name, request))
        matchingThread.run { budget in
            if cancelled() { return true }
            while budget > 0 {
                guard let step = search.value.advance(budget: &budget) else { return false }
                if let decision = self.conclude(step, of: search.value) {
                    done(decision)
                    return true
                }
            }
            return false
        }
    }

    /// The thread long searches take turns on, started with the first of them.
    private let matchingThread = StubMatchingThread()

    /// Hits and misses since start, over all sets (getMetrics).
    var totals: (hits: Int, misses: Int) { state.withLock { ($0.hitCount, $0.missCount) } }

    /// The stub's new id; -32005 past `maxPerSet` (nothing added).
    func add(_ stub: StubParams) throws -> String {
        try addAll(set: stub.set, [stub]).first ?? ""
    }

    /// All of them (to `set`, whatever each names) or none: a set that would go past
    /// `maxPerSet` takes none.
    func addAll(set name: String, _ drafts: [StubParams]) throws -> [String] {
        try state.withLock { s throws -> [String] in
            var entry = s.sets[name] ?? StubSet()
            guard entry.stubs.count + drafts.count <= Self.maxPerSet else {
                throw RPCError(.overloaded, "Overloaded: a stub set holds at most \(Self.maxPerSet) stubs", data: [
                    "limit": JSONValue(Self.maxPerSet), "set": .string(name),
                ])
            }
            let bytes = drafts.reduce(0) { $0 + Self.bodyBytes($1.answers) }
            guard s.bodyBytes + bytes <= maxBodyBytes else {
                throw RPCError(.overloaded, "Overloaded: the stubs' bodies would take more than \(maxBodyBytes) bytes", data: [
                    "limit": JSONValue(maxBodyBytes), "set": .string(name),
                ])
            }
            s.bodyBytes += bytes
            var ids: [String] = []
            for draft in drafts {
                let id = "stub-\(s.nextID)"
                s.nextID += 1
                let stub = Stub(id: id, set: name, match: draft.match, answers: draft.answers, priority: draft.priority, times: draft.times)
                entry.patternStates += draft.match.urlPattern?.states ?? 0
                // After every stub of the same or a higher priority: equal priorities keep their order.
                let at = entry.stubs.last.map { $0.priority >= draft.priority } ?? true
                    ? entry.stubs.endIndex
                    : entry.stubs.firstIndex { $0.priority < draft.priority } ?? entry.stubs.endIndex
                entry.stubs.insert(stub, at: at)
                ids.append(id)
            }
            s.sets[name] = entry
            return ids
        }
    }

    /// Removes one stub (by id, in `set` if given), a whole set's stubs, or every stub;
    /// returns how many went.
    func remove(set name: String?, stubID: String?) -> Int {
        state.withLock { s in
            var removed = 0
            for key in Array(s.sets.keys) where name == nil || key == name {
                guard var entry = s.sets[key] else { continue }
                let gone = entry.stubs.filter { stubID == nil || $0.id == stubID }
                entry.stubs.removeAll { stubID == nil || $0.id == stubID }
                s.bodyBytes -= gone.reduce(0) { $0 + Self.bodyBytes($1.answers) }
                entry.patternStates -= gone.reduce(0) { $0 + ($1.match.urlPattern?.states ?? 0) }
                removed += gone.count
                s.sets[key] = entry
            }
            return removed
        }
    }

    /// recordStubs: from now on the set's misses are recorded (a new HAR file at `path`).
    func record(set name: String, har path: String, log: Logger?) throws {
        let recording = try StubRecording(set: name, path: path, log: log)
        state.withLock { s in
            var entry = s.sets[name] ?? StubSet()
            entry.recording = recording
            s.sets[name] = entry
        }
    }

    /// A recorded exchange becomes an answer of the set: the next answer of the stub made for
    /// the same request, or a new stub.
    func recorded(_ request: HTTPRequest, _ response: HTTPResponse, in recording: StubRecording) {
        var answer = StubResponse(status: response.status, body: response.body)
        answer.headers = response.headers.filter { header in !HARStubs.wireHeaders.contains(where: header.name.caseInsensitiveEquals) }
        let (key, body) = StubRecording.identity(request)
        let appended = state.withLock { s -> Bool in
            guard let existing = recording.stubID(for: key),
                  let index = s.sets[recording.set]?.stubs.firstIndex(where: { $0.id == existing }) else { return false }
            s.sets[recording.set]?.stubs[index].answers.append(.respond(answer))
            s.bodyBytes += answer.body.count
            return true
        }
        if appended { return }
        let match = StubMatch.recorded(method: request.method, url: request.url, body: body)
        if let id = try? add(StubParams(set: recording.set, match: match, answers: [.respond(answer)])) {
            recording.remember(id, for: key)
        }
    }

    private static func bodyBytes(_ answers: [StubAnswer]) -> Int {
        answers.reduce(0) { total, answer in
            if case .respond(let response) = answer { return total + response.body.count }
            return total
        }
    }

    /// The answers' bodies held now, over all sets (tests).
    var heldBodyBytes: Int { state.withLock { $0.bodyBytes } }

    func setMode(_ mode: OnMiss, for name: String) {
        state.withLock { s in
            var entry = s.sets[name] ?? StubSet()
            entry.onMiss = mode
            s.sets[name] = entry
        }
    }

    /// The stubs of one set (or of all, by set name), in the order they are tried, and the last misses (oldest first).
    func snapshot(set name: String?) -> (stubs: [Stub], misses: [StubMiss]) {
        state.withLock { s in
            let names = name.map { [$0] } ?? s.sets.keys.sorted()
            return (names.flatMap { s.sets[$0]?.stubs ?? [] }, s.misses)
        }
    }

    /// A HAR file's entries as stubs of `set` (HARStubs): all or none. A file that cannot be
    /// read is a file error (-32003), one past HARStubs.maxFileBytes or not HAR, -32602
    /// naming `har`.
    func load(harFile path: String, set name: String) throws -> Int {
        try load(har: try HARStubs.read(path, field: "har"), path: path, set: name)
    }

    private func load(har text: [UInt8], path: String, set name: String) throws -> Int {
        do {
            return try addAll(set: name, try HARStubs.stubs(fromText: text, set: name)).count
        } catch let invalid as HARStubs.Invalid {
            throw RPCError.invalidParams(field: "har", "\(path): \(invalid.reason)")
        }
    }

    /// `--stubs FILE`: a HAR file, or a JSON array of addStub params (each in the set it
    /// names, "default" if none); all or none. Errors name the entry.
    func load(startupFile path: String, policy: FilePolicy) throws -> Int {
        let text = try HARStubs.read(path, field: "--stubs")
        guard text.first(where: { $0 != 0x20 && $0 != 0x0A && $0 != 0x0D && $0 != 0x09 }) == UInt8(ascii: "[") else {
            return try load(har: text, path: path, set: "default")
        }
        let document: JSONValue
        do {
            document = try JSONCodec.decode(text)
        } catch {
            throw RPCError.invalidParams(field: "--stubs", "\(path) is not JSON: \(error)")
        }
        let entries = document.arrayValue ?? []
        let drafts = try entries.enumerated().map { index, entry in try StubParams(entry, policy: policy, path: "[\(index)]") }
        var added = 0
        for set in Set(drafts.map(\.set)).sorted() { added += try addAll(set: set, drafts.filter { $0.set == set }).count }
        return added
    }
}
