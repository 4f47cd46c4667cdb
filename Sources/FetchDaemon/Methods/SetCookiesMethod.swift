import FetchEngine
import JSONRPC

/// `setCookies {cookies: [...], cookieJar?}`: adds or replaces cookies (same name, domain
/// and path) in a jar, as if a server had set them; an expiry in the past deletes one.
struct SetCookiesMethod: RPCMethod {
    static let name = "setCookies"

    let engine: HTTPEngine

    func call(_ params: JSONValue?, context: RPCContext) async throws -> JSONValue {
        var reader = try ParamReader(params)
        guard let list = try reader.array("cookies") else {
            throw RPCError.invalidParams(field: reader.field("cookies"), "required")
        }
        var cookies: [Cookie] = []
        for (index, value) in list.enumerated() {
            cookies.append(try CookieParams.cookie(value, field: reader.field("cookies") + "[\(index)]"))
        }
        let jar = try CookieParams.jar(&reader)
        try reader.finish()
        let stored = cookies.isEmpty ? 0 : await engine.store(cookies, inJar: jar)
        return ["stored": JSONValue(stored)]
    }
}
