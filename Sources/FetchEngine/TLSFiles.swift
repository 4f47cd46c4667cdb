internal import CCurl

/// A request's TLS files (`caFile`, `certFile`, `keyFile`), read whole through the checked
/// open (`LocalFile`) on the thread that starts the transfer, and handed to libcurl as bytes
/// (`CURLOPT_CAINFO_BLOB`, `CURLOPT_SSLCERT_BLOB`, `CURLOPT_SSLKEY_BLOB`). libcurl never opens
/// them by name: it would, on the engine thread, when the transfer connects, and a FIFO put
/// under the name (even after a check of it) would hold every transfer of that thread.
public struct TLSFiles: Sendable {
    /// The most read from one TLS file (a bundle of every public CA is about 200 KiB).
    public static let maxBytes = 4 << 20

    let ca: [UInt8]?
    let cert: [UInt8]?
    let key: [UInt8]?

    /// The files the options name, read now; nil when they name none. A file that is not a
    /// regular file, can't be read or is larger than `maxBytes` throws, naming its path.
    init?(_ options: TransportOptions?) throws(TransferFileError) {
        guard let options, options.caFile != nil || options.certFile != nil || options.keyFile != nil else { return nil }
        ca = try options.caFile.map(Self.read)
        cert = try options.certFile.map(Self.read)
        key = try options.keyFile.map(Self.read)
    }

    private static func read(_ path: String) throws(TransferFileError) -> [UInt8] {
        do {
            return try LocalFile.read(path, limit: maxBytes).bytes
        } catch {
            throw error.fileError
        }
    }

    /// Sets the files on the handle (the engine thread), where their names would go. A CA file
    /// takes the place of the default bundle file, as a CA file by name does (libcurl's
    /// default CA directory, if it has one, stays, as it does for curl's `--cacert`). A
    /// certificate without a key file is read for its key too, as by name. libcurl copies
    /// the bytes (CURL_BLOB_COPY); the handle is reset before another transfer uses it.
    func apply(to easy: UnsafeMutableRawPointer) {
        if let ca {
            fetchd_easy_setopt_str(easy, CURLOPT_CAINFO, nil)
            Self.set(easy, CURLOPT_CAINFO_BLOB, ca)
        }
        if let cert { Self.set(easy, CURLOPT_SSLCERT_BLOB, cert) }
        if let key { Self.set(easy, CURLOPT_SSLKEY_BLOB, key) }
    }

    private static func set(_ easy: UnsafeMutableRawPointer, _ option: CURLoption, _ bytes: [UInt8]) {
        bytes.withUnsafeBytes { raw in
            var blob = curl_blob(data: UnsafeMutableRawPointer(mutating: raw.baseAddress), len: raw.count, flags: UInt32(CURL_BLOB_COPY))
            _ = withUnsafeMutablePointer(to: &blob) { fetchd_easy_setopt_ptr(easy, option, UnsafeMutableRawPointer($0)) }
        }
    }
}
