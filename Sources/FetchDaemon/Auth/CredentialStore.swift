import FetchEngine
import FoundationEssentials
import JSONRPC
import Synchronization

/// Every auth rule (setAuth, --auth-file) and the credential each holds, shared by every
/// client. Owned by the Daemon and handed to `CredentialStage` and the auth methods.
///
/// A rule's credential goes through its `CredentialCache`: at most one fetch per rule at a
/// time, every request that needs it waits for that one. Waiters are resumed outside the
/// lock, on the thread that ended the fetch.
final class CredentialStore: Sendable {
    /// Resumes a request that waited: the credential and its generation, or why there is none.
    typealias Waiter = @Sendable (Result<(Credential, generation: Int), any Error>) -> Void
    /// Makes a rule's credential (a file read, a token request) and calls back once.
    typealias Fetch = @Sendable (AuthRule, CredentialRequest, _ done: @escaping @Sendable (Result<Credential, AuthProblem>) -> Void) -> Void

    /// A rule as a request found it: enough to come back to it.
    struct Match: Sendable {
        let ruleID: UInt64
        let rule: AuthRule
        var host: String { rule.host.description }
    }

    private struct Entry {
        let id: UInt64
        let rule: AuthRule
        var cache = CredentialCache<Waiter>()
    }

    private struct State {
        /// In the order set; a host's newer rule replaces its older one in place.
        var entries: [Entry] = []
        /// Rules replaced or removed while their fetch ran: its waiters still get its result.
        var retired: [UInt64: Entry] = [:]
        var nextID: UInt64 = 1
    }

    private let state = Locked(State())
    /// How many rules there are, read without the lock: with none (the usual case), a
    /// request's lookup costs one atomic load.
    private let ruleCount = Atomic<Int>(0)
    /// Monotonic seconds (the jobs' clock); tests move their own.
    let now: @Sendable () -> Double
    private let fetch: Fetch
    private let log: Logger?

    init(now: @escaping @Sendable () -> Double, log: Logger? = nil, fetch: @escaping Fetch) {
        self.now = now
        self.log = log
        self.fetch = fetch
    }

    // MARK: rules

    /// Adds the rule, or replaces the one with the same host pattern (its credential is dropped).
    func set(_ rule: AuthRule) {
        state.withLock { s in
            let entry = Entry(id: s.nextID, rule: rule)
            s.nextID += 1
            if let index = s.entries.firstIndex(where: { $0.rule.host == rule.host }) {
                retire(&s, s.entries[index])
                s.entries[index] = entry
            } else {
                s.entries.append(entry)
            }
            ruleCount.store(s.entries.count, ordering: .releasing)
        }
        log?.info("auth: \(rule.type) rule set for \(rule.host)")
    }

    /// Removes the host pattern's rule; false when it had none.
    func remove(_ host: AuthHostPattern) -> Bool {
        let removed = state.withLock { s -> Bool in
            guard let index = s.entries.firstIndex(where: { $0.rule.host == host }) else { return false }
            retire(&s, s.entries.remove(at: index))
            ruleCount.store(s.entries.count, ordering: .releasing)
            return true
        }
        if removed { log?.info("auth: rule for \(host) removed") }
        return removed
    }

    private func retire(_ s: inout State, _ entry: Entry) {
        if entry.cache.fetching { s.retired[entry.id] = entry }
    }

    /// The rule for a request to `name` (lowercased) on `port`: `name:port`, then `name`,
    /// then the longest `*.domain` that matches.
    func match(name: String, port: Int) -> Match? {
        guard ruleCount.load(ordering: .acquiring) > 0 else { return nil }
        return state.withLock { s in
            var best: Entry?
            for entry in s.entries where entry.rule.host.matches(name: name, port: port) {
                if best.map({ entry.rule.host.precedence > $0.rule.host.precedence }) ?? true { best = entry }
            }
            return best.map { Match(ruleID: $0.id, rule: $0.rule) }
        }
    }

    /// What getAuth shows of each rule, in the order set: never a secret.
    func status() -> [AuthStatus] {
        let now = self.now()
        return state.withLock { s in
            s.entries.map { entry in
                let held = entry.rule.fixedCredential ?? entry.cache.usable(now: now)?.0
                return AuthStatus(host: entry.rule.host.description, type: entry.rule.type, hasCredential: held != nil,
                                  expiresIn: held?.expiresAt.map { $0 - now }, lastError: entry.cache.lastError)
            }
        }
    }

    func status(of host: AuthHostPattern) -> AuthStatus? {
        status().first { $0.host == host.description }
    }

    // MARK: credentials

    /// The rule's credential if it can be used now without waiting.
    func ready(_ match: Match) -> (Credential, generation: Int?)? {
        if let fixed = match.rule.fixedCredential { return (fixed, nil) }
        let now = self.now()
        return state.withLock { s in
            s.entries.first { $0.id == match.ruleID }?.cache.usable(now: now).map { ($0.0, $0.generation) }
        }
    }

    /// Resumes `waiter` with the rule's credential: at once when one is held, else when the
    /// fetch ends (this call starts it when none runs). `id` names the waiter for `cancel`.
    func wait(_ match: Match, id: UInt64, for request: CredentialRequest, _ waiter: @escaping Waiter) {
        let now = self.now()
        enum Next { case resume(Credential, Int), fetch, wait, gone }
        let next = state.withLock { s -> Next in
            guard let index = s.entries.firstIndex(where: { $0.id == match.ruleID }) else { return .gone }
            switch s.entries[index].cache.lookup(now: now, id: id, waiter: waiter) {
            case .ready(let credential, let generation): return .resume(credential, generation)
            case .wait(let startFetch): return startFetch ? .fetch : .wait
            }
        }
        switch next {
        case .resume(let credential, let generation): waiter(.success((credential, generation)))
        case .wait: break
        case .gone: waiter(.failure(AuthProblem("the rule for \(match.host) was replaced or removed while the request waited")))
        case .fetch:
            log?.debug("auth: fetching the credential of the \(match.rule.type) rule for \(match.host)")
            fetch(match.rule, request) { [self] result in fetched(match, result, ranFor: id) }
        }
    }

    /// The fetch started for waiter `runner` ended: every waiter gets its result; a helper's
    /// own words (its stderr line) go to `runner` alone, and to the log.
    private func fetched(_ match: Match, _ result: Result<Credential, AuthProblem>, ranFor runner: UInt64) {
        let (own, waiters, generation) = state.withLock { s -> (Waiter?, [Waiter], Int) in
            func end(_ cache: inout CredentialCache<Waiter>) -> (Waiter?, [Waiter], Int) {
                // Taken out first (unless it was cancelled): it is resumed with its own answer.
                let own = cache.cancel(id: runner)
                let (waiters, generation) = cache.fetched(result)
                return (own, waiters, generation)
            }
            if var entry = s.retired.removeValue(forKey: match.ruleID) { return end(&entry.cache) }
            guard let index = s.entries.firstIndex(where: { $0.id == match.ruleID }) else { return (nil, [], 0) }
            return end(&s.entries[index].cache)
        }
        switch result {
        case .success(let credential):
            let expiry = credential.expiresAt.map { ", expires in \(Int(($0 - now()).rounded())) s" } ?? ""
            let count = waiters.count + (own == nil ? 0 : 1)
            if credential.kept { log?.info("auth: rule for \(match.host): credential fetched for \(count) request(s)\(expiry)") }
            own?(.success((credential, generation)))
            waiters.forEach { $0(.success((credential, generation))) }
        case .failure(let problem):
            log?.warning("auth: rule for \(match.host): \(problem.detail)")
            own?(.failure(problem))
            let told = problem.withoutHelperWords
            waiters.forEach { $0(.failure(told)) }
        }
    }

    /// A waiter's job was cancelled: it is resumed with `error` now, not with the fetch's result.
    func cancel(_ match: Match, id: UInt64, error: any Error) {
        let waiter = state.withLock { s -> Waiter? in
            if let index = s.entries.firstIndex(where: { $0.id == match.ruleID }) {
                return s.entries[index].cache.cancel(id: id)
            }
            return s.retired[match.ruleID]?.cache.cancel(id: id)
        }
        waiter?(.failure(error))
    }

    /// A 401 answered a request that carried credential `generation`: it is not used again.
    func drop(_ match: Match, generation: Int) {
        let dropped = state.withLock { s -> Bool in
            guard let index = s.entries.firstIndex(where: { $0.id == match.ruleID }) else { return false }
            return s.entries[index].cache.drop(generation: generation)
        }
        if dropped { log?.info("auth: rule for \(match.host): credential dropped after a 401") }
    }
}

/// A rule as getAuth shows it.
struct AuthStatus: Sendable, Equatable {
    let host: String
    let type: String
    let hasCredential: Bool
    /// Seconds from now until the held credential expires; nil: no expiry known.
    let expiresIn: Double?
    let lastError: String?

    var json: JSONValue {
        [
            "host": .string(host), "type": .string(type), "hasCredential": .bool(hasCredential),
            "expiresAt": expiresIn.map { .string(ISO8601Format.string(Date().addingTimeInterval($0))) } ?? .null,
            "lastError": JSONValue(lastError),
        ]
    }
}
