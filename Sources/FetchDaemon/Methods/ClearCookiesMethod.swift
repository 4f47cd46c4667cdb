import FetchEngine
import JSONRPC

/// `clearCookies {domain?, cookieJar?}`: removes a jar's cookies, or only those of a domain
/// and its subdomains.
struct ClearCookiesMethod: RPCMethod {
    static let name = "clearCookies"

    let engine: HTTPEngine

    func call(_ params: JSONValue?, context: RPCContext) async throws -> JSONValue {
        var reader = try ParamReader(params)
        let domain = try CookieParams.domain(&reader)
        let jar = try CookieParams.jar(&reader)
        try reader.finish()
        return ["removed": JSONValue(await engine.clearCookies(inJar: jar, domain: domain))]
    }
}
