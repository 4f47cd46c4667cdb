import FetchEngine
import XCTest

final class ResumableUploadTests: XCTestCase {
    private func headers(_ pairs: [String: String]) -> [HTTPHeader] { pairs.map { HTTPHeader($0.key, $0.value) } }

    func testStartThenChunksThenFinalize() throws {
        var upload = ResumableUpload(fileSize: 10, chunkSize: 4, contentType: "text/plain")
        XCTAssertEqual(upload.next, .start)
        XCTAssertTrue(upload.startHeaders().contains(HTTPHeader("X-Goog-Upload-Header-Content-Length", "10")))
        try upload.started(status: 200, headers: headers(["X-Goog-Upload-URL": "http://h/up/1", "X-Goog-Upload-Status": "active"]))
        XCTAssertEqual(upload.uploadURL, "http://h/up/1")
        XCTAssertEqual(upload.next, .chunk(offset: 0, length: 4, finalize: false))
        XCTAssertTrue(upload.headers(for: upload.next).contains(HTTPHeader("X-Goog-Upload-Command", "upload")))
        try upload.answered(status: 200, headers: headers(["X-Goog-Upload-Status": "active"]))
        XCTAssertEqual(upload.next, .chunk(offset: 4, length: 4, finalize: false))
        try upload.answered(status: 200, headers: headers(["X-Goog-Upload-Size-Received": "8"]))
        XCTAssertEqual(upload.next, .chunk(offset: 8, length: 2, finalize: true))
        XCTAssertTrue(upload.headers(for: upload.next).contains(HTTPHeader("X-Goog-Upload-Command", "upload, finalize")))
        XCTAssertTrue(upload.headers(for: upload.next).contains(HTTPHeader("X-Goog-Upload-Offset", "8")))
        try upload.answered(status: 200, headers: headers(["X-Goog-Upload-Status": "final"]))
        XCTAssertEqual(upload.next, .finished)
    }

    func testAFailureQueriesAndContinuesFromWhatTheServerHas() throws {
        var upload = ResumableUpload(fileSize: 100, chunkSize: 40, contentType: "application/octet-stream")
        try upload.started(status: 201, headers: headers(["x-goog-upload-url": "http://h/u"]))
        upload.failed()
        XCTAssertEqual(upload.next, .query)
        XCTAssertTrue(upload.headers(for: .query).contains(HTTPHeader("X-Goog-Upload-Command", "query")))
        try upload.answered(status: 200, headers: headers(["X-Goog-Upload-Size-Received": "25", "X-Goog-Upload-Status": "active"]))
        XCTAssertEqual(upload.offset, 25)
        XCTAssertEqual(upload.next, .chunk(offset: 25, length: 40, finalize: false))
    }

    func testARefusedChunkQueries() throws {
        var upload = ResumableUpload(fileSize: 10, chunkSize: 10, contentType: "x/y")
        try upload.started(status: 200, headers: headers(["X-Goog-Upload-URL": "u"]))
        try upload.answered(status: 400, headers: headers(["X-Goog-Upload-Status": "active"]))
        XCTAssertEqual(upload.next, .query)
    }

    func testStartWithoutAnUploadURLIsNotResumable() {
        var upload = ResumableUpload(fileSize: 10, chunkSize: 10, contentType: "x/y")
        XCTAssertThrowsError(try upload.started(status: 200, headers: [])) { XCTAssertEqual($0 as? ResumableUpload.Problem, .notResumable) }
        XCTAssertThrowsError(try upload.started(status: 403, headers: headers(["X-Goog-Upload-URL": "u"])))
    }

    func testSizeReceivedPastTheEndIsAViolation() throws {
        var upload = ResumableUpload(fileSize: 10, chunkSize: 10, contentType: "x/y")
        try upload.started(status: 200, headers: headers(["X-Goog-Upload-URL": "u"]))
        XCTAssertThrowsError(try upload.answered(status: 200, headers: headers(["X-Goog-Upload-Size-Received": "11"])))
    }

    func testEmptyFileIsOneFinalizingChunk() throws {
        var upload = ResumableUpload(fileSize: 0, chunkSize: 10, contentType: "x/y")
        try upload.started(status: 200, headers: headers(["X-Goog-Upload-URL": "u"]))
        XCTAssertEqual(upload.next, .chunk(offset: 0, length: 0, finalize: true))
    }

    func testAResumedSessionQueriesFirst() throws {
        var upload = ResumableUpload(fileSize: 100, chunkSize: 40, contentType: "x/y")
        upload.resume(uploadURL: "http://h/session/1")
        XCTAssertEqual(upload.uploadURL, "http://h/session/1")
        XCTAssertEqual(upload.next, .query)
        try upload.answered(status: 200, headers: headers(["X-Goog-Upload-Status": "active", "X-Goog-Upload-Size-Received": "80"]))
        XCTAssertEqual(upload.next, .chunk(offset: 80, length: 20, finalize: true))
    }
}
