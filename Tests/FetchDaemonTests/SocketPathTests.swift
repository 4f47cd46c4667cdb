@testable import FetchDaemon
import Glibc
import XCTest

/// The fallback socket directory (/tmp/fetchd-<uid>): created 0700 when missing, refused when
/// it is a link, not a directory, someone else's, or open to group or others. Run on
/// directories under a temporary one; the real /tmp/fetchd-<uid> is the integration tests'.
final class SocketPathTests: XCTestCase {
    private var dir = ""
    private var uid: UInt32 { getuid() }

    override func setUpWithError() throws {
        var template = Array("/tmp/fetchd-sockdir-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw XCTSkip("mkdtemp failed") }
        dir = String(cString: made)
    }

    override func tearDown() {
        for name in ["link", "file"] { unlink(dir + "/\(name)") }
        for name in ["private", "open", "target", "new"] { rmdir(dir + "/\(name)") }
        rmdir(dir)
    }

    private func refusal(_ path: String, uid: UInt32? = nil) -> String? {
        do {
            try SocketPath.preparePrivateDirectory(path, uid: uid ?? self.uid)
            return nil
        } catch {
            return error.description
        }
    }

    private func info(_ path: String) -> stat {
        var info = stat()
        XCTAssertEqual(lstat(path, &info), 0, path)
        return info
    }

    func testFallbackPathIsInsideThePrivateDirectory() {
        XCTAssertEqual(SocketPath.fallbackDirectory(uid: 5), "/tmp/fetchd-5")
        XCTAssertEqual(SocketPath.resolve(flag: nil, environment: [:], uid: 5), "/tmp/fetchd-5/fetchd.sock")
    }

    func testMissingDirectoryIsCreated0700() {
        let path = dir + "/new"
        let old = umask(0)  // the mode must not depend on the caller's umask being strict
        defer { umask(old) }
        XCTAssertNil(refusal(path))
        let made = info(path)
        XCTAssertEqual(made.st_mode & S_IFMT, S_IFDIR)
        XCTAssertEqual(made.st_mode & 0o7777, 0o700)
        XCTAssertEqual(made.st_uid, uid)
        XCTAssertNil(refusal(path), "an existing good directory is used as it is")
    }

    func testExistingPrivateDirectoryIsUsed() {
        XCTAssertEqual(mkdir(dir + "/private", 0o700), 0)
        XCTAssertNil(refusal(dir + "/private"))
    }

    func testSymbolicLinkIsRefusedEvenToAGoodDirectory() throws {
        XCTAssertEqual(mkdir(dir + "/target", 0o700), 0)
        XCTAssertEqual(symlink(dir + "/target", dir + "/link"), 0)
        let message = try XCTUnwrap(refusal(dir + "/link"))
        XCTAssertTrue(message.contains("\(dir)/link is a symbolic link"), message)
    }

    func testFileIsRefused() throws {
        let fd = open(dir + "/file", O_WRONLY | O_CREAT | O_EXCL, 0o600)
        XCTAssertGreaterThanOrEqual(fd, 0)
        close(fd)
        let message = try XCTUnwrap(refusal(dir + "/file"))
        XCTAssertTrue(message.contains("\(dir)/file exists and is not a directory"), message)
    }

    func testGroupOrOtherAccessIsRefused() throws {
        XCTAssertEqual(mkdir(dir + "/open", 0o700), 0)
        for mode: mode_t in [0o777, 0o755, 0o710, 0o701, 0o1777] {
            XCTAssertEqual(chmod(dir + "/open", mode), 0)
            let message = try XCTUnwrap(refusal(dir + "/open"), "mode \(String(mode, radix: 8))")
            XCTAssertTrue(message.contains("has mode 0\(String(mode, radix: 8))"), message)
            XCTAssertTrue(message.contains("must be 0700"), message)
        }
    }

    func testAnotherOwnerIsRefused() throws {
        XCTAssertEqual(mkdir(dir + "/private", 0o700), 0)
        let other: UInt32 = uid == 0 ? 65534 : 0
        let message = try XCTUnwrap(refusal(dir + "/private", uid: other))
        XCTAssertTrue(message.contains("owned by uid \(uid), not by uid \(other)"), message)
    }

    func testPathsOutsideTheFallbackDirectoryAreNotTouched() throws {
        // Only /tmp/fetchd-<uid>/... is prepared; another path is the socket server's business.
        try SocketPath.prepare(socketPath: dir + "/new/fetchd.sock", uid: uid)
        var info = stat()
        XCTAssertNotEqual(lstat(dir + "/new", &info), 0)
    }
}
