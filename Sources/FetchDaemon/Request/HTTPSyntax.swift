import FetchEngine
import JSONRPC

/// The one check of every value a request puts into an HTTP message: the method, header
/// names and values, the URL's length, and an upload's media types, filenames and form
/// field names (multipart part headers, or a resumable upload's
/// X-Goog-Upload-Header-Content-Type). `RequestModel` and `UploadMethod` call it while they
/// decode params, so a bad value is refused with -32602 naming its JSON path before anything
/// is sent. Nothing a client gives can end a header line, add a header or a part header, or
/// frame a second request on a connection that other clients' requests reuse.
enum HTTPSyntax {
    /// An HTTP method (RFC 9110 section 9.1): a token.
    static func checkMethod(_ method: String, field: String) throws(RPCError) {
        guard !method.isEmpty, method.utf8.allSatisfy(isTokenByte) else {
            throw RPCError.invalidParams(field: field, "not an HTTP method token")
        }
    }

    /// Headers whose values frame the message: the daemon sets them from the body. One of
    /// the client's choosing would make the rest of the body read as another request.
    static let framingHeaders = ["Content-Length", "Transfer-Encoding"]

    /// One of the request's headers: a token for its name, a field value (RFC 9110 section
    /// 5.5: visible characters, spaces, tabs and bytes from 0x80 up, never CR, LF, NUL or
    /// another control character). Returns its size as sent, for `HeaderBudget`.
    static func checkHeader(name: String, value: String, field: String) throws(RPCError) -> Int {
        guard !name.isEmpty, name.utf8.allSatisfy(isTokenByte) else {
            throw RPCError.invalidParams(field: field, "not a valid header name")
        }
        if framingHeaders.contains(where: name.caseInsensitiveEquals) {
            throw RPCError.invalidParams(field: field, "\(name) is set by the daemon from the body")
        }
        try checkFieldValue(value, field: field)
        return name.utf8.count + value.utf8.count + 4  // ": " and CRLF
    }

    static func checkFieldValue(_ value: String, field: String) throws(RPCError) {
        guard value.utf8.allSatisfy(isFieldValueByte) else {
            throw RPCError.invalidParams(field: field, "control characters (CR, LF, NUL and the others but tab) are not allowed")
        }
    }

    /// The request's headers together stay within `HTTPLimits.headerBytes`; the header that
    /// goes past it is the one named.
    struct HeaderBudget {
        private(set) var used = 0

        mutating func add(_ bytes: Int, field: String) throws(RPCError) {
            used += bytes
            guard used <= HTTPLimits.headerBytes else {
                throw RPCError.invalidParams(
                    field: field, "the request's headers would take \(used) bytes (name, value and 4 bytes each); the limit is \(HTTPLimits.headerBytes)",
                    limit: HTTPLimits.headerBytes)
            }
        }
    }

    /// The URL as sent, its query included, within `HTTPLimits.urlBytes`.
    static func checkURLLength(_ bytes: Int, field: String) throws(RPCError) {
        guard bytes <= HTTPLimits.urlBytes else {
            throw RPCError.invalidParams(
                field: field, "the URL would be \(bytes) bytes; the limit is \(HTTPLimits.urlBytes)", limit: HTTPLimits.urlBytes)
        }
    }

    /// A media type (RFC 9110 section 8.3.1): `type/subtype`, both tokens, then optional
    /// parameters after a `;`, all of it a field value, at most `HTTPLimits.mediaTypeBytes`.
    static func checkMediaType(_ text: String, field: String) throws(RPCError) {
        try checkFieldValue(text, field: field)
        guard text.utf8.count <= HTTPLimits.mediaTypeBytes else {
            throw RPCError.invalidParams(field: field, "longer than \(HTTPLimits.mediaTypeBytes) bytes", limit: HTTPLimits.mediaTypeBytes)
        }
        let utf8 = Array(text.utf8)
        var end = utf8.firstIndex(of: UInt8(ascii: ";")) ?? utf8.count
        while end > 0, utf8[end - 1] == UInt8(ascii: " ") || utf8[end - 1] == UInt8(ascii: "\t") { end -= 1 }
        let essence = utf8[..<end]
        guard let slash = essence.firstIndex(of: UInt8(ascii: "/")), slash > 0, slash < end - 1,
              essence[..<slash].allSatisfy(isTokenByte), essence[(slash + 1)...].allSatisfy(isTokenByte) else {
            throw RPCError.invalidParams(field: field, "not a media type (type/subtype, then optional ;parameters)")
        }
    }

    /// A form field name or a filename: a quoted parameter of a part's Content-Disposition.
    /// libcurl writes `"` as %22 (and CR, LF as %0D, %0A) the way browsers do (WHATWG HTML,
    /// "multipart/form-data encoding"), so a quote is sent escaped, never refused; control
    /// characters are refused here.
    static func checkDispositionParameter(_ text: String, field: String) throws(RPCError) {
        guard text.utf8.allSatisfy({ $0 >= 0x20 && $0 != 0x7F }) else {
            throw RPCError.invalidParams(field: field, "control characters are not allowed")
        }
    }

    static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return tokenPunctuation.contains(byte)
        }
    }

    private static let tokenPunctuation = Array("!#$%&'*+-.^_`|~".utf8)

    /// HTAB, SP, VCHAR and obs-text (RFC 9110 section 5.5).
    static func isFieldValueByte(_ byte: UInt8) -> Bool {
        byte == 0x09 || (byte >= 0x20 && byte != 0x7F)
    }
}
