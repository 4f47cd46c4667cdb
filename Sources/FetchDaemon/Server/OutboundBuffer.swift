/// Bytes waiting to be written to one client, consumed from the front without copying the
/// rest on every partial write.
struct OutboundBuffer {
    private var bytes: [UInt8] = []
    private var start = 0

    var count: Int { bytes.count - start }
    var isEmpty: Bool { count == 0 }

    mutating func append(_ more: [UInt8]) {
        if isEmpty {
            bytes = more
            start = 0
        } else {
            bytes.append(contentsOf: more)
        }
    }

    /// Writes as much as the descriptor takes. Returns false when the peer is gone.
    mutating func flush(to fd: Int32) -> Bool {
        while !isEmpty {
            let written = bytes.withUnsafeBytes { buffer in
                send(fd, buffer.baseAddress! + start, count, Int32(MSG_NOSIGNAL))
            }
            if written > 0 {
                start += written
            } else if written < 0 && errno == EINTR {
                continue
            } else if written < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                break
            } else {
                return false
            }
        }
        if isEmpty {
            bytes.removeAll(keepingCapacity: bytes.capacity <= 1 << 20)
            start = 0
        } else if start > 1 << 20 && start > bytes.count / 2 {
            bytes.removeFirst(start)
            start = 0
        }
        return true
    }

    mutating func discard() {
        bytes = []
        start = 0
    }
}

import FoundationEssentials
import Glibc
