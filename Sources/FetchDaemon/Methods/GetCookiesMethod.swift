import FetchEngine
import FoundationEssentials
import Glibc
import JSONRPC

/// `getCookies {url?, domain?, cookieJar?}`: a jar's live cookies; with `url`, exactly the
/// ones a request to that URL would send, in the order it sends them.
struct GetCookiesMethod: RPCMethod {
    static let name = "getCookies"

    let engine: HTTPEngine

    func call(_ params: JSONValue?, context: RPCContext) async throws -> JSONValue {
        var reader = try ParamReader(params)
        let target = try reader.string("url").map { (url: String) throws(RPCError) in
            try CookieParams.target(url, field: reader.field("url"))
        }
        let domain = try CookieParams.domain(&reader)
        let jar = try CookieParams.jar(&reader)
        try reader.finish()

        var cookies = await engine.cookies(inJar: jar)
        if let domain { cookies = cookies.filter { $0.isWithin(domain: domain) } }
        if let target {
            cookies = cookies.cookies(for: target, now: Int64(Date().timeIntervalSince1970))
        } else {
            cookies.sort { ($0.domain, $0.path, $0.name) < ($1.domain, $1.path, $1.name) }
        }
        return ["cookies": .array(cookies.map(CookieParams.json))]
    }
}
