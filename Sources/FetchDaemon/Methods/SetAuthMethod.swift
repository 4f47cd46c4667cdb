import JSONRPC

/// `setAuth {host, type, ...}`: adds or replaces the auth rule of a host pattern (its held
/// credential is dropped); `type: null` removes it. The answer is the rule as getAuth shows
/// it (never a secret), or `{host, removed}`.
struct SetAuthMethod: InlineRPCMethod {
    static let name = "setAuth"

    let store: CredentialStore
    let policy: FilePolicy

    func callInline(_ params: JSONValue?, context: RPCContext) throws -> JSONValue {
        let (host, rule) = try AuthRule.read(params, policy: policy)
        guard let rule else {
            return ["host": .string(host.description), "removed": .bool(store.remove(host))]
        }
        store.set(rule)
        return store.status(of: host)?.json ?? .null
    }
}
