internal import CCurl

/// How large a request's own URL and headers, and a response's headers, may be; each
/// limit is fetchd's, set below the libcurl limit that is its reason, so that going past it
/// is an error that names it and not libcurl's "Out of memory" (docs/protocol.md, "Checked values and size limits").
public enum HTTPLimits {
    /// libcurl builds a request's head (request line and every header) in a buffer of at
    /// most 1 MiB (DYN_HTTP_REQUEST in lib/dynbuf.h) and fails with CURLE_OUT_OF_MEMORY
    /// beyond it. The budget below is split so that the worst case fits:
    public static let requestHeadBytes = 1 << 20

    /// A URL (with its query) can appear in the head more than once: its path and query in
    /// the request line, its host in Host, its user and password base64-encoded (4/3 of
    /// their length) in Authorization. At most 4/3 x 256 KiB = 341 KiB.
    public static let urlBytes = 256 << 10

    /// The request's own headers, each counted as sent: name, ": ", value and CRLF.
    public static let headerBytes = 512 << 10

    /// The rest (171 KiB) is for what libcurl and fetchd add: Cookie (at most 8190 bytes,
    /// libcurl's MAX_COOKIE_HEADER_LEN), If-Range with a stored validator (a response
    /// header, so at most `responseHeaderLineBytes`), User-Agent, Accept-Encoding,
    /// Content-Type, Content-Length, Expect, a resumable upload's X-Goog-Upload-* headers.
    public static let headroomBytes = requestHeadBytes - urlBytes * 4 / 3 - headerBytes

    /// One response header line: libcurl refuses a longer one with CURLE_OUT_OF_MEMORY
    /// (CURL_MAX_HTTP_HEADER, 100 KiB). It never reaches the header callback, so this one
    /// is libcurl's own; the engine names it when libcurl stops there.
    public static let responseHeaderLineBytes = Int(CURL_MAX_HTTP_HEADER)

    /// Every response header of a transfer, over all its redirect hops and interim (1xx)
    /// answers: libcurl refuses more than 300 KiB (MAX_HTTP_RESP_HEADER_SIZE) with
    /// CURLE_RECV_ERROR, which reads as a connection reset. The header callback counts the
    /// same bytes and stops the transfer first, at 256 KiB.
    public static let responseHeaderBytes = 256 << 10

    /// A multipart part's or a resumable upload's media type (`mimetype`): RFC 6838 keeps
    /// type and subtype names to 127 characters each; this leaves room for parameters and
    /// keeps it well inside `headroomBytes` when it becomes X-Goog-Upload-Header-Content-Type.
    public static let mediaTypeBytes = 1024
}
