internal import CCurl
import Glibc

/// A request body that libcurl reads through a transfer's read and seek callbacks (engine
/// thread): a file (`UploadFile`), or bytes in memory read out through the send caps.
protocol UploadSource: AnyObject {
    func read(into buffer: UnsafeMutablePointer<CChar>?, _ capacity: Int) -> Int
    func seek(to position: curl_off_t, origin: Int32) -> Int32
}

/// An in-memory body (or multipart part) of a transfer with a send cap: handed to libcurl a
/// piece at a time as the caps allow, where an uncapped one is copied to libcurl whole.
final class UploadBytes: UploadSource {
    private let bytes: [UInt8]
    private var position = 0
    private let throttle: TransferThrottle

    init(_ bytes: [UInt8], throttle: TransferThrottle) {
        self.bytes = bytes
        self.throttle = throttle
    }

    func read(into buffer: UnsafeMutablePointer<CChar>?, _ capacity: Int) -> Int {
        guard let buffer else { return Int(fetchd_readfunc_abort()) }
        return throttle.read(capacity, remaining: Int64(bytes.count - position)) { n in
            bytes.withUnsafeBytes { UnsafeMutableRawPointer(buffer).copyMemory(from: $0.baseAddress! + position, byteCount: n) }
            position += n
            return n
        }
    }

    /// libcurl rewinds to send the body again (a redirect that keeps it, an auth round).
    func seek(to position: curl_off_t, origin: Int32) -> Int32 {
        guard origin == SEEK_SET, position >= 0, position <= bytes.count else { return fetchd_seekfunc_fail() }
        self.position = Int(position)
        return fetchd_seekfunc_ok()
    }
}
