import JSONRPC

/// `setAuth {host, type, ...}`: adds or replaces the auth rule of a host pattern (its held
/// credential is dropped); `type: null` removes it. The answer is the rule as getAuth shows
/// it (never a secret), or `{host, removed}`. Answered on the thread that read it; a rule
/// that names a secret file under `--allow-dir` is set once the file's path is checked on
/// the blocking threads (realpath).
struct SetAuthMethod: ReplyingRPCMethod {
    static let name = "setAuth"

    let store: CredentialStore
    let policy: FilePolicy
    let blocking: WorkerThreads

    func start(_ params: JSONValue?, context: RPCContext, reply: @escaping Reply) throws {
        let store = store
        try policy.decodeCheckingPaths(on: blocking, { try AuthRule.read(params, policy: $0) },
                                       then: { reply(.success(Self.apply($0, to: store))) },
                                       failed: { reply(.failure($0)) })
    }

    private static func apply(_ read: (host: AuthHostPattern, rule: AuthRule?), to store: CredentialStore) -> JSONValue {
        guard let rule = read.rule else {
            return ["host": .string(read.host.description), "removed": .bool(store.remove(read.host))]
        }
        store.set(rule)
        return store.status(of: read.host)?.json ?? .null
    }
}
