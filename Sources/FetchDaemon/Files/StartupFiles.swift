import FetchEngine

/// Files the command line names that a library opens by name later: libcurl reads
/// `--ca-file` when a TLS connection is made, on an engine thread. Checked at start through
/// the checked open (a regular file that can be read, at most `TLSFiles.maxBytes`), so a
/// FIFO or a huge file there is a clear error now (exit 1), not a thread held later. The
/// files the daemon reads itself (--config, --auth-file, --stubs, --cookie-file) are read
/// through LocalFile where they are read.
enum StartupFiles {
    static func check(_ options: DaemonOptions) throws(StartupError) {
        if let path = options.caFile {
            do {
                try LocalFile.check(path, limit: TLSFiles.maxBytes)
            } catch .tooLarge {
                throw StartupError("--ca-file \(path) is larger than \(TLSFiles.maxBytes) bytes, the most read from a TLS file")
            } catch {
                throw StartupError("cannot read --ca-file \(path): \(error.detail)")
            }
        }
    }
}
