internal import CCurl
import Glibc

/// The headers fetchd sends unless a request gives or removes its own: `User-Agent`,
/// `Accept: */*` and `Accept-Encoding` with every encoding libcurl decodes.
///
/// They go out as custom header lines (CURLOPT_HTTPHEADER), not as CURLOPT_USERAGENT and
/// CURLOPT_ACCEPT_ENCODING's own headers: libcurl 7.88 formats each of those into a string on
/// every request, then copies it into the request one character at a time. Under callgrind
/// (a floor variant, per request) the two options cost 5.8k and 10.9k instructions, the same
/// lines in a list 3.5k and 5.7k. A request with none of its own headers uses `list`, built
/// once per engine thread; CURLOPT_ACCEPT_ENCODING is still set on every transfer, as it is
/// what turns libcurl's decoding on.
final class DefaultHeaders {
    /// Name and value of each, in the order libcurl itself sends them.
    let lines: [(name: String, line: String)]
    /// All of them, for requests that name no header of their own. Read-only once built.
    let list: UnsafeMutablePointer<curl_slist>?

    init(userAgent: String) {
        lines = [("User-Agent", "User-Agent: \(userAgent)"), ("Accept", "Accept: */*"),
                 ("Accept-Encoding", "Accept-Encoding: \(Self.acceptEncodings)")]
        var list: UnsafeMutablePointer<curl_slist>? = nil
        for (_, line) in lines { list = curl_slist_append(list, line) }
        self.list = list
    }

    deinit { curl_slist_free_all(list) }

    /// What CURLOPT_ACCEPT_ENCODING "" offers (lib/content_encoding.c in 7.88: its decoders in
    /// table order, or "identity" with none), from the features this libcurl was built with.
    static let acceptEncodings: String = {
        let features = fetchd_curl_features()
        var names: [String] = []
        if features & fetchd_feature_libz() != 0 { names += ["deflate", "gzip"] }
        if features & fetchd_feature_brotli() != 0 { names.append("br") }
        if features & fetchd_feature_zstd() != 0 { names.append("zstd") }
        return names.isEmpty ? "identity" : names.joined(separator: ", ")
    }()
}
