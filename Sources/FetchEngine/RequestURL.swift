internal import CCurl
import Glibc

/// A URL checked by libcurl's own parser, so what we accept is exactly what it will fetch.
public struct RequestURL: Sendable, Equatable {
    public let text: String
    public let scheme: String
    public let host: String
    public let port: Int
    /// libcurl's parse itself, for the transfer (`HTTPRequest.parsedURL`).
    public let parsed: ParsedURL

    public static func == (a: RequestURL, b: RequestURL) -> Bool {
        a.text == b.text && a.scheme == b.scheme && a.host == b.host && a.port == b.port
    }

    public enum Problem: Error, Equatable, Sendable {
        case malformed(String)
        case schemeNotAllowed(String)
    }

    /// A Location (absolute, or relative to `base`) resolved as libcurl resolves it when it
    /// follows a redirect; nil when libcurl cannot.
    public static func resolve(_ reference: String, against base: String) -> String? {
        guard !reference.containsNUL, !base.containsNUL, let handle = curl_url() else { return nil }
        defer { curl_url_cleanup(handle) }
        guard curl_url_set(handle, CURLUPART_URL, base, 0) == CURLUE_OK,
              curl_url_set(handle, CURLUPART_URL, reference, 0) == CURLUE_OK else { return nil }
        var value: UnsafeMutablePointer<CChar>? = nil
        guard curl_url_get(handle, CURLUPART_URL, &value, 0) == CURLUE_OK, let value else { return nil }
        defer { curl_free(value) }
        return String(cString: value)
    }

    public init(_ text: String) throws(Problem) {
        // libcurl reads the text as a C string: a NUL would end the URL there, unseen.
        guard !text.containsNUL else { throw .malformed("contains NUL") }
        guard let handle = curl_url() else { throw .malformed("out of memory") }
        // Owned from here: freed with the last copy of this URL (or now, if it is refused).
        let parsed = ParsedURL(text: text, handle: handle)
        // withCString: a native string's own bytes, where passing the String itself made a
        // NUL-terminated copy in an array of its own.
        let status = text.withCString { curl_url_set(handle, CURLUPART_URL, $0, 0) }
        guard status == CURLUE_OK else {
            throw .malformed(String(cString: curl_url_strerror(status)))
        }
        func part(_ which: CURLUPart, flags: UInt32 = 0) -> String? {
            var value: UnsafeMutablePointer<CChar>? = nil
            guard curl_url_get(handle, which, &value, flags) == CURLUE_OK, let value else { return nil }
            defer { curl_free(value) }
            return String(cString: value)
        }
        // libcurl took the URL without guessing a scheme, so the text starts with one and a colon.
        let (scheme, noAuthority) = Self.scheme(of: text)
        guard let scheme else {
            let utf8 = text.utf8
            let colon = utf8.firstIndex(of: UInt8(ascii: ":")) ?? utf8.endIndex
            throw .schemeNotAllowed(Self.lowercasedASCII(String(text[..<colon])))
        }
        // libcurl reads "http:///path" as host "path"; an empty authority is malformed.
        if noAuthority { throw .malformed("no host") }
        guard let host = part(CURLUPART_HOST), !host.isEmpty else { throw .malformed("no host") }
        self.text = text
        self.scheme = scheme
        self.parsed = parsed
        self.host = Self.lowercasedASCII(host)
        self.port = Int(part(CURLUPART_PORT, flags: UInt32(CURLU_DEFAULT_PORT)) ?? "") ?? (scheme == "https" ? 443 : 80)
    }

    /// "http" or "https" (the text's scheme in any case; nil for any other), and whether
    /// ":///" follows it (an empty authority). Read from the bytes: this runs for every request.
    private static func scheme(of text: String) -> (String?, noAuthority: Bool) {
        var text = text
        return text.withUTF8 { bytes -> (String?, noAuthority: Bool) in
            // `| 0x20` lowers a letter; for these four letters no other byte maps onto them.
            func isLetter(_ index: Int, _ letter: Unicode.Scalar) -> Bool {
                index < bytes.count && bytes[index] | 0x20 == UInt8(ascii: letter)
            }
            guard isLetter(0, "h"), isLetter(1, "t"), isLetter(2, "t"), isLetter(3, "p") else { return (nil, false) }
            let colon = isLetter(4, "s") ? 5 : 4
            guard colon < bytes.count, bytes[colon] == UInt8(ascii: ":") else { return (nil, false) }
            let noAuthority = colon + 3 < bytes.count && bytes[colon + 1] == UInt8(ascii: "/")
                && bytes[colon + 2] == UInt8(ascii: "/") && bytes[colon + 3] == UInt8(ascii: "/")
            return (colon == 5 ? "https" : "http", noAuthority)
        }
    }

    /// Names in URLs are ASCII here (libcurl gives IDN hosts in punycode): lowered without a
    /// copy when there is nothing to lower.
    private static func lowercasedASCII(_ text: String) -> String {
        text.utf8.contains(where: { (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) }) ? text.lowercased() : text
    }
}

/// libcurl's parse of a URL (a CURLU handle), kept so that the transfer does not parse the
/// URL again: CURLOPT_CURLU in place of CURLOPT_URL (about 5k instructions less per request,
/// callgrind). Never changed once made (libcurl only reads it, and dups it to follow a
/// redirect), so any thread may use it.
public final class ParsedURL: @unchecked Sendable {
    /// The text it was parsed from: the transfer uses the handle only for that same URL.
    public let text: String
    let handle: OpaquePointer

    init(text: String, handle: OpaquePointer) {
        self.text = text
        self.handle = handle
    }

    deinit { curl_url_cleanup(handle) }
}

extension String {
    /// Whether the text holds a NUL byte (which C would take for its end): one memchr over
    /// the contiguous UTF-8, not a generic scan byte by byte (this runs for every request).
    public var containsNUL: Bool {
        var text = self
        return text.withUTF8 { bytes in
            guard let base = bytes.baseAddress else { return false }
            return memchr(base, 0, bytes.count) != nil
        }
    }
}
