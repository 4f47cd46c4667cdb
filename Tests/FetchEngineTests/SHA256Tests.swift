import FetchEngine
import XCTest

final class SHA256Tests: XCTestCase {
    func testNISTVectors() {
        XCTAssertEqual(SHA256.hex(of: []), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        XCTAssertEqual(SHA256.hex(of: Array("abc".utf8)), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        XCTAssertEqual(SHA256.hex(of: Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)),
                       "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        XCTAssertEqual(SHA256.hex(of: Array(repeating: UInt8(ascii: "a"), count: 1_000_000)),
                       "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    func testIncrementalUpdatesInAnyPiecesAgree() {
        let data = (0..<10_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
        let whole = SHA256.hex(of: data)
        for piece in [1, 3, 63, 64, 65, 1000] {
            var hasher = SHA256()
            var start = 0
            while start < data.count {
                let end = min(start + piece, data.count)
                hasher.update(Array(data[start..<end]))
                start = end
            }
            XCTAssertEqual(hasher.finishHex(), whole, "pieces of \(piece)")
        }
    }

    func testPaddingBoundaries() {
        // Lengths around the 55/56/64 byte padding edges, checked against sha256sum's output.
        XCTAssertEqual(SHA256.hex(of: Array(repeating: 0x61, count: 55)), "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318")
        XCTAssertEqual(SHA256.hex(of: Array(repeating: 0x61, count: 56)), "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a")
        XCTAssertEqual(SHA256.hex(of: Array(repeating: 0x61, count: 64)), "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb")
    }
}

final class SHA256HardwarePathTests: XCTestCase {
    /// Large updates take the hardware path when the CPU has it; odd offsets and sizes mix
    /// both paths. The digest must not depend on how the bytes arrive.
    func testLargeAndMisalignedUpdatesAgreeWithTheVector() {
        let million = [UInt8](repeating: UInt8(ascii: "a"), count: 1_000_000)
        var hasher = SHA256()
        hasher.update(Array(million[0..<3]))          // leaves a partial block pending
        hasher.update(Array(million[3..<700_001]))    // many whole blocks after it
        hasher.update(Array(million[700_001...]))
        XCTAssertEqual(hasher.finishHex(), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }
}
