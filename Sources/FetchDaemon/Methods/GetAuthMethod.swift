import JSONRPC

/// `getAuth`: every auth rule, in the order set, with whether a credential is held, when it
/// expires and the last fetch's error; never a secret.
struct GetAuthMethod: InlineRPCMethod {
    static let name = "getAuth"

    let store: CredentialStore

    func callInline(_ params: JSONValue?, context: RPCContext) throws -> JSONValue {
        let reader = try ParamReader(params)
        try reader.finish()
        return ["rules": .array(store.status().map(\.json))]
    }
}
