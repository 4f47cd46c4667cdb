internal import CCurl

/// A multipart/form-data body, streamed by libcurl's mime API: file parts are read from
/// disk as they are sent, never loaded whole.
public struct MultipartForm: Sendable, Equatable {
    public struct Part: Sendable, Equatable {
        public enum Source: Sendable, Equatable {
            case bytes([UInt8])
            case file(path: String)
        }

        public var name: String
        public var filename: String?
        public var contentType: String?
        public var source: Source

        public init(name: String, filename: String? = nil, contentType: String? = nil, source: Source) {
            self.name = name
            self.filename = filename
            self.contentType = contentType
            self.source = source
        }
    }

    public var parts: [Part]

    public init(parts: [Part]) {
        self.parts = parts
    }

    /// The paths of the file parts, in order.
    var filePaths: [String] {
        parts.compactMap { if case .file(let path) = $0.source { path } else { nil } }
    }

    /// Builds the curl_mime for an easy handle; the caller frees it after the transfer.
    /// `files` are the file parts' files, opened by the caller in `filePaths` order (never by
    /// libcurl on the engine thread, where a FIFO would hold open() and every transfer); they
    /// must outlive the mime. With a `throttle` (a send cap), the in-memory parts are read
    /// through it too (the file parts' `UploadFile`s have it already): their readers are
    /// added to `kept`, which must outlive the mime as well.
    func makeMime(for easy: UnsafeMutableRawPointer, files: [UploadFile], throttle: TransferThrottle? = nil,
                  keeping kept: inout [UploadBytes]) -> OpaquePointer? {
        guard let mime = curl_mime_init(easy) else { return nil }
        var nextFile = files.makeIterator()
        for part in parts {
            guard let mimePart = curl_mime_addpart(mime) else { continue }
            curl_mime_name(mimePart, part.name)
            switch part.source {
            case .bytes(let bytes) where throttle != nil:
                let reader = UploadBytes(bytes, throttle: throttle!)
                kept.append(reader)
                curl_mime_data_cb(mimePart, curl_off_t(bytes.count), mimeBytesRead, mimeBytesSeek, nil,
                                  Unmanaged.passUnretained(reader).toOpaque())
            case .bytes(let bytes):
                // curl_mime_data copies the bytes.
                var copy = bytes
                if copy.isEmpty { copy = [0] }
                copy.withUnsafeBytes { buffer in
                    _ = curl_mime_data(mimePart, buffer.baseAddress!.assumingMemoryBound(to: CChar.self), bytes.count)
                }
            case .file(let path):
                guard let file = nextFile.next() else { continue }
                let arg = Unmanaged.passUnretained(file).toOpaque()
                curl_mime_data_cb(mimePart, curl_off_t(file.length), mimeFileRead, mimeFileSeek, nil, arg)
                curl_mime_filename(mimePart, String(path.split(separator: "/").last ?? ""))
            }
            if let filename = part.filename { curl_mime_filename(mimePart, filename) }
            if let type = part.contentType { curl_mime_type(mimePart, type) }
        }
        return mime
    }
}

private let mimeFileRead: curl_read_callback = { buffer, size, count, arg in
    Unmanaged<UploadFile>.fromOpaque(arg!).takeUnretainedValue().read(into: buffer, size * count)
}

private let mimeFileSeek: curl_seek_callback = { arg, offset, origin in
    Unmanaged<UploadFile>.fromOpaque(arg!).takeUnretainedValue().seek(to: offset, origin: origin)
}

private let mimeBytesRead: curl_read_callback = { buffer, size, count, arg in
    Unmanaged<UploadBytes>.fromOpaque(arg!).takeUnretainedValue().read(into: buffer, size * count)
}

private let mimeBytesSeek: curl_seek_callback = { arg, offset, origin in
    Unmanaged<UploadBytes>.fromOpaque(arg!).takeUnretainedValue().seek(to: offset, origin: origin)
}

/// Content types by file extension, for parts that do not name theirs.
public enum MimeTypes {
    public static func guess(forFilename name: String) -> String {
        guard let dot = name.lastIndex(of: ".") else { return "application/octet-stream" }
        return table[name[name.index(after: dot)...].lowercased()] ?? "application/octet-stream"
    }

    static let table: [String: String] = [
        "txt": "text/plain", "text": "text/plain", "log": "text/plain", "md": "text/markdown",
        "csv": "text/csv", "tsv": "text/tab-separated-values", "html": "text/html", "htm": "text/html",
        "css": "text/css", "js": "text/javascript", "mjs": "text/javascript", "xml": "application/xml",
        "json": "application/json", "yaml": "application/yaml", "yml": "application/yaml",
        "pdf": "application/pdf", "zip": "application/zip", "gz": "application/gzip", "tgz": "application/gzip",
        "tar": "application/x-tar", "bz2": "application/x-bzip2", "xz": "application/x-xz", "zst": "application/zstd",
        "png": "image/png", "jpg": "image/jpeg", "jpeg": "image/jpeg", "gif": "image/gif", "webp": "image/webp",
        "svg": "image/svg+xml", "ico": "image/vnd.microsoft.icon", "bmp": "image/bmp", "tif": "image/tiff", "tiff": "image/tiff",
        "mp3": "audio/mpeg", "ogg": "audio/ogg", "wav": "audio/wav", "flac": "audio/flac",
        "mp4": "video/mp4", "webm": "video/webm", "mov": "video/quicktime", "mkv": "video/x-matroska",
        "wasm": "application/wasm", "bin": "application/octet-stream",
    ]
}
