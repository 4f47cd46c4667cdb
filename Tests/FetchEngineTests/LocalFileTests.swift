@testable import FetchEngine
import Glibc
import XCTest

/// Files clients name: never written through a link or a second hard link, never waited on
/// when they are FIFOs, replaced atomically under names nobody could plant.
final class LocalFileTests: XCTestCase {
    private var dir = ""

    override func setUpWithError() throws {
        var template = Array("/tmp/fetchd-localfile-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw XCTSkip("mkdtemp failed") }
        dir = String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
        _ = made
    }

    override func tearDown() {
        // Subdirectories too (a test makes `sub/`): nothing is left in /tmp.
        try? FileManager.default.removeItem(atPath: dir)
    }

    private func write(_ name: String, _ text: String) -> String {
        let path = dir + "/" + name
        _ = FileManager.default.createFile(atPath: path, contents: Data(text.utf8))
        return path
    }

    private func contents(_ path: String) -> String {
        String(decoding: FileManager.default.contents(atPath: path) ?? Data(), as: UTF8.self)
    }

    private func refusal(_ open: () throws(TransferFileError) -> Int32) -> String {
        do {
            let fd = try open()
            close(fd)
            return "opened"
        } catch {
            return error.detail
        }
    }

    func testRefusals() {
        let precious = write("precious", "keep")
        symlink(precious, dir + "/link")
        link(precious, dir + "/hard")
        mkfifo(dir + "/fifo", 0o600)
        mkdir(dir + "/sub", 0o700)
        let cases: [(String, () throws(TransferFileError) -> Int32, String)] = [
            ("write through a symlink", { () throws(TransferFileError) in try LocalFile.openForWriting(self.dir + "/link") }, "symbolic link"),
            ("write a second hard link", { () throws(TransferFileError) in try LocalFile.openForWriting(self.dir + "/hard") }, "hard links"),
            ("write a FIFO with no reader", { () throws(TransferFileError) in try LocalFile.openForWriting(self.dir + "/fifo") }, "FIFO"),
            ("read a FIFO with no writer", { () throws(TransferFileError) in try LocalFile.openForReading(self.dir + "/fifo") }, "FIFO"),
            ("read a directory", { () throws(TransferFileError) in try LocalFile.openForReading(self.dir + "/sub") }, "directory"),
            ("read a link when links are refused",
             { () throws(TransferFileError) in try LocalFile.openForReading(self.dir + "/link", followLinks: false) }, "symbolic link"),
        ]
        for (name, open, expected) in cases {
            XCTAssertTrue(refusal(open).contains(expected), "\(name): \(refusal(open))")
        }
        XCTAssertEqual(contents(precious), "keep")
        XCTAssertEqual(refusal { () throws(TransferFileError) in try LocalFile.openForReading(self.dir + "/link") }, "opened",
                       "reading follows links unless told not to")
    }

    func testReadingAFIFOReturnsAtOnceAndBlockingIsRestored() throws {
        mkfifo(dir + "/fifo", 0o600)
        // Would wait forever in a plain open(); here it is refused at once.
        XCTAssertTrue(refusal { () throws(TransferFileError) in try LocalFile.openForReading(self.dir + "/fifo") }.contains("FIFO"))
        let fd = try LocalFile.openForWriting(dir + "/new", mode: 0o640)
        defer { close(fd) }
        XCTAssertEqual(fcntl(fd, F_GETFL) & O_NONBLOCK, 0, "O_NONBLOCK is cleared on a regular file")
        var info = stat()
        fstat(fd, &info)
        XCTAssertEqual(info.st_mode & 0o777, 0o640 & ~umaskValue())
    }

    private func umaskValue() -> mode_t {
        let old = umask(0)
        umask(old)
        return old
    }

    func testReplaceNeverWritesThroughALinkUnderTheName() throws {
        let precious = write("precious", "keep")
        symlink(precious, dir + "/target.har")
        try LocalFile.replace("target.har", in: dir, with: Array("new".utf8))
        var info = stat()
        XCTAssertEqual(lstat(dir + "/target.har", &info), 0)
        XCTAssertEqual(info.st_mode & S_IFMT, S_IFREG, "the link was replaced by the file")
        XCTAssertEqual(info.st_mode & 0o777, 0o600)
        XCTAssertEqual(contents(dir + "/target.har"), "new")
        XCTAssertEqual(contents(precious), "keep")
        let left = try FileManager.default.contentsOfDirectory(atPath: dir).sorted()
        XCTAssertEqual(left, ["precious", "target.har"], "no temporary file is left behind")
    }

    func testTemporaryNamesAreFreshAndExclusive() throws {
        let (a, pathA) = try LocalFile.createTemporary(in: dir, for: "x")
        let (b, pathB) = try LocalFile.createTemporary(in: dir, for: "x")
        close(a)
        close(b)
        XCTAssertNotEqual(pathA, pathB)
        XCTAssertTrue(pathA.hasPrefix(dir + "/.x."), pathA)
    }

    func testContentsOfMissingAndPresentFiles() throws {
        XCTAssertNil(try LocalFile.contents(of: dir + "/missing", limit: 100))
        XCTAssertEqual(try LocalFile.contents(of: write("c", "cookies"), limit: 100).map { String(decoding: $0, as: UTF8.self) }, "cookies")
        mkfifo(dir + "/fifo", 0o600)
        XCTAssertThrowsError(try LocalFile.contents(of: dir + "/fifo", limit: 100))
    }

    private func readError(_ path: String, limit: Int) -> LocalFile.ReadError? {
        do {
            _ = try LocalFile.read(path, limit: limit)
            return nil
        } catch {
            return error
        }
    }

    func testReadIsBoundedBeforeAnythingIsRead() throws {
        let small = write("small", "12345")
        let read = try LocalFile.read(small, limit: 5)
        XCTAssertEqual(read.bytes, Array("12345".utf8))
        XCTAssertEqual(read.owner, getuid())
        XCTAssertEqual(try LocalFile.read(write("empty", ""), limit: 5).bytes, [])
        XCTAssertEqual(readError(small, limit: 4), .tooLarge(path: small, limit: 4))
        // A sparse file of 1 TiB: refused from its size, nothing read or allocated.
        let huge = dir + "/huge"
        let fd = open(huge, O_WRONLY | O_CREAT, 0o600)
        XCTAssertEqual(ftruncate(fd, 1 << 40), 0)
        close(fd)
        XCTAssertEqual(readError(huge, limit: 64 << 20), .tooLarge(path: huge, limit: 64 << 20))
        XCTAssertThrowsError(try LocalFile.check(huge, limit: 64 << 20))
        XCTAssertNoThrow(try LocalFile.check(small, limit: 5))
    }

    func testReadRefusesWhatIsNotARegularFile() {
        mkfifo(dir + "/fifo", 0o600)
        mkdir(dir + "/sub", 0o700)
        XCTAssertTrue(readError(dir + "/fifo", limit: 10)?.detail.contains("FIFO") ?? false)
        XCTAssertTrue(readError(dir + "/sub", limit: 10)?.detail.contains("directory") ?? false)
        XCTAssertTrue(readError("/dev/zero", limit: 10)?.detail.contains("character device") ?? false)
        XCTAssertTrue(readError(dir + "/missing", limit: 10)?.detail.contains("No such file") ?? false)
        XCTAssertThrowsError(try LocalFile.check(dir + "/fifo", limit: 10))
    }

    func testAFileWithoutASizeIsStillBounded() throws {
        // /proc files have st_size 0 and any length: read as they come, up to the bound.
        XCTAssertFalse(try LocalFile.read("/proc/self/status", limit: 1 << 20).bytes.isEmpty)
        XCTAssertEqual(readError("/proc/self/status", limit: 10), .tooLarge(path: "/proc/self/status", limit: 10))
    }

    func testReplaceLeavesWhatIsNotARegularFile() throws {
        mkfifo(dir + "/fifo", 0o600)
        XCTAssertThrowsError(try LocalFile.replace("fifo", in: dir, with: Array("x".utf8))) { error in
            XCTAssertTrue((error as? TransferFileError)?.detail.contains("FIFO") ?? false, "\(error)")
        }
        var info = stat()
        lstat(dir + "/fifo", &info)
        XCTAssertEqual(info.st_mode & S_IFMT, S_IFIFO)
        let precious = write("precious", "keep")
        symlink(precious, dir + "/link")
        try LocalFile.replace("link", in: dir, with: Array("new".utf8))
        XCTAssertEqual(contents(precious), "keep", "a link is replaced, never written through")
        XCTAssertEqual(contents(dir + "/link"), "new")
        lstat(dir + "/link", &info)
        XCTAssertEqual(info.st_mode & 0o777, 0o600)
    }
}
