import Dispatch
@testable import FetchEngine
import Glibc
import XCTest

/// How a download's body reaches its part file: libcurl's pieces (16 KiB at most) are
/// gathered into blocks, handed to the download's queue (which writes them) when a read ends
/// (a shorter piece), when a block is full, and at the end of the attempt; a write that
/// fails, at any of those moments, is reported.
final class DownloadSinkTests: XCTestCase {
    private var dir = ""
    private let fullPiece = [UInt8](repeating: 7, count: DownloadSink.largestPiece)

    override func setUpWithError() throws {
        var template = Array("/tmp/fetchd-sink-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw XCTSkip("mkdtemp failed") }
        dir = String(cString: made)
    }

    override func tearDown() {
        for name in ["a", "b", "c", "d", "e"] { unlink(dir + "/\(name).part") }
        rmdir(dir)
    }

    private func sink(_ path: String, hashQueue: DispatchQueue? = nil) throws -> DownloadSink {
        // /dev/full takes the open and refuses every write with ENOSPC; the part file's own
        // open refuses devices, so the test opens it.
        let descriptor = path == "/dev/full" ? open(path, O_WRONLY | O_CLOEXEC) : nil
        return try DownloadSink(target: DownloadTarget(partPath: path, resumeOffset: 0, hashOfExistingBytes: SHA256(),
                                                       writesBackEarly: false), hashQueue: hashQueue, descriptor: descriptor)
    }

    func testThePartFileIsNeverADeviceOrALink() {
        XCTAssertThrowsError(try DownloadSink(target: DownloadTarget(partPath: "/dev/full", resumeOffset: 0,
                                                                     hashOfExistingBytes: SHA256())))
        symlink("/dev/null", dir + "/a.part")
        XCTAssertThrowsError(try DownloadSink(target: DownloadTarget(partPath: dir + "/a.part", resumeOffset: 0,
                                                                     hashOfExistingBytes: SHA256())))
    }

    private func taken(_ sink: DownloadSink, _ bytes: [UInt8], resume: @escaping @Sendable () -> Void = {}) -> DownloadSink.Taken {
        var errorBody: [UInt8] = []
        return bytes.withUnsafeBytes { sink.write($0, status: 200, headers: [], errorBody: &errorBody, resume: resume) }
    }

    private func write(_ sink: DownloadSink, _ bytes: [UInt8]) -> Bool {
        taken(sink, bytes) == .all
    }

    /// Waits for the sink's queue to write what it was handed; why a write failed, if one did.
    private func drained(_ sink: DownloadSink) -> String? {
        let done = DispatchSemaphore(value: 0)
        let failure = Locked<String?>(nil)
        sink.whenWritten { reason in
            failure.withLock { $0 = reason }
            done.signal()
        }
        done.wait()
        return failure.withLock { $0 }
    }

    private func size(_ path: String) -> Int {
        var info = stat()
        return stat(path, &info) == 0 ? Int(info.st_size) : -1
    }

    func testFullPiecesWaitForTheEndOfTheRead() throws {
        let path = dir + "/a.part"
        let sink = try sink(path)
        XCTAssertTrue(write(sink, fullPiece))
        XCTAssertTrue(write(sink, fullPiece))
        XCTAssertNil(drained(sink))
        XCTAssertEqual(size(path), 0, "full pieces are gathered, not written one by one")
        XCTAssertTrue(write(sink, [1, 2, 3]))
        XCTAssertNil(drained(sink))
        XCTAssertEqual(size(path), 2 * fullPiece.count + 3, "a shorter piece ends the read: all of it is written")
    }

    func testABlockIsWrittenWhenItIsFull() throws {
        let path = dir + "/b.part"
        let sink = try sink(path)
        let perBlock = DownloadSink.blockBytes / fullPiece.count
        for _ in 0..<perBlock - 1 { XCTAssertTrue(write(sink, fullPiece)) }
        XCTAssertNil(drained(sink))
        XCTAssertEqual(size(path), 0)
        XCTAssertTrue(write(sink, fullPiece))
        XCTAssertNil(drained(sink))
        XCTAssertEqual(size(path), DownloadSink.blockBytes)
        XCTAssertTrue(write(sink, fullPiece))
        XCTAssertNil(drained(sink))
        XCTAssertEqual(size(path), DownloadSink.blockBytes, "the next block is gathered again")
    }

    func testFinishWritesTheRestAndHashesEveryByte() throws {
        let path = dir + "/c.part"
        let sink = try sink(path)
        var all: [UInt8] = []
        for n in 0..<(DownloadSink.blockBytes / fullPiece.count + 3) {
            let piece = [UInt8](repeating: UInt8(truncatingIfNeeded: n), count: fullPiece.count)
            all += piece
            XCTAssertTrue(write(sink, piece))
        }
        let outcome = sink.finish(status: 200, headers: [])
        XCTAssertNil(sink.failure)
        XCTAssertNil(drained(sink))
        XCTAssertEqual(outcome.fileBytes, Int64(all.count))
        XCTAssertEqual(size(path), all.count)
        var expected = SHA256()
        expected.update(all)
        XCTAssertEqual(outcome.sha256, expected.finishHex())
    }

    func testAWriteThatFailsAtTheEndIsReported() throws {
        let sink = try sink("/dev/full")
        XCTAssertTrue(write(sink, fullPiece), "gathered: nothing is written yet")
        XCTAssertNil(sink.failure)
        _ = sink.finish(status: 200, headers: [])
        XCTAssertNil(sink.failure, "the last block is written on the queue")
        let detail = drained(sink) ?? "no failure"
        XCTAssertTrue(detail.contains("No space left on device"), detail)
    }

    func testAWriteThatFailsMidBodyStopsTheTransfer() throws {
        let sink = try sink("/dev/full")
        XCTAssertTrue(write(sink, [1, 2, 3]), "the end of a read is handed to the queue")
        XCTAssertNotNil(drained(sink), "where the write fails")
        XCTAssertFalse(write(sink, fullPiece), "nothing more is taken after a failed write")
        guard case .writing(let detail)? = sink.failure else { return XCTFail("\(String(describing: sink.failure))") }
        XCTAssertTrue(detail.contains("No space left on device"), detail)
    }

    func testTheTransferPausesWhileTheHashIsBehindAndResumesOnce() throws {
        let path = dir + "/e.part"
        let queue = DispatchQueue(label: "test.sha256")
        let sink = try sink(path, hashQueue: queue)
        let resumed = expectation(description: "resume called")
        resumed.assertForOverFulfill = true
        // The first piece decides where the body goes (that resets the hash, on its queue).
        XCTAssertEqual(taken(sink, fullPiece), .all)
        var pieces = 1
        var all = fullPiece
        queue.suspend()  // from here the hash makes no progress until resumed
        while pieces < 10_000 {
            let piece = [UInt8](repeating: UInt8(truncatingIfNeeded: pieces), count: fullPiece.count)
            let result = taken(sink, piece) { resumed.fulfill() }
            if result == .pause { break }
            XCTAssertEqual(result, .all)
            all += piece
            pieces += 1
        }
        let blocksBeforePause = BackgroundHasher.maxPendingBytes / DownloadSink.blockBytes + 1
        XCTAssertEqual(pieces, blocksBeforePause * (DownloadSink.blockBytes / fullPiece.count),
                       "it takes pieces until more than maxPendingBytes wait to be hashed, then pauses")
        queue.resume()
        wait(for: [resumed], timeout: 10)
        XCTAssertNil(drained(sink))
        XCTAssertEqual(size(path), all.count, "what it took is in the file")
        let piece = [UInt8](repeating: 1, count: 100)
        XCTAssertEqual(taken(sink, piece) { XCTFail("paused again") }, .all, "after the resume it takes pieces again")
        all += piece
        let outcome = sink.finish(status: 200, headers: [])
        var expected = SHA256()
        expected.update(all)
        XCTAssertEqual(outcome.sha256, expected.finishHex())
        XCTAssertEqual(size(path), all.count)
    }

    func testAnAnswerOutside2xxNeverTouchesTheFile() throws {
        let path = dir + "/d.part"
        let sink = try sink(path)
        var errorBody: [UInt8] = []
        let taken = [UInt8]("not found".utf8).withUnsafeBytes {
            sink.write($0, status: 404, headers: [], errorBody: &errorBody, resume: {})
        }
        XCTAssertEqual(taken, .all)
        XCTAssertEqual(errorBody, [UInt8]("not found".utf8))
        XCTAssertTrue(sink.flush())
        XCTAssertNil(drained(sink))
        XCTAssertEqual(size(path), 0)
    }
}
