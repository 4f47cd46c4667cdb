import XCTest

@testable import FetchDaemon

final class DaemonOptionsTests: XCTestCase {
    func testSocketPathRulesInOrder() {
        XCTAssertEqual(SocketPath.resolve(flag: "/a.sock", environment: ["FETCHD_SOCKET": "/b"], uid: 5), "/a.sock")
        XCTAssertEqual(SocketPath.resolve(flag: nil, environment: ["FETCHD_SOCKET": "/b", "XDG_RUNTIME_DIR": "/run/user/5"], uid: 5), "/b")
        XCTAssertEqual(SocketPath.resolve(flag: nil, environment: ["XDG_RUNTIME_DIR": "/run/user/5"], uid: 5), "/run/user/5/fetchd.sock")
        XCTAssertEqual(SocketPath.resolve(flag: nil, environment: [:], uid: 5), "/tmp/fetchd-5/fetchd.sock")
    }

    func testParsesEveryOption() throws {
        let command = try DaemonOptions.parse([
            "--socket", "/s", "--ca-file=/ca.pem", "--max-message-bytes", "1024", "--allow-dir", "/data",
            "--allow-dir", "/tmp", "--shutdown-grace", "0.5", "--verbose",
        ])
        guard case .run(let options) = command else { return XCTFail("\(command)") }
        XCTAssertEqual(options.socketPath, "/s")
        XCTAssertEqual(options.caFile, "/ca.pem")
        XCTAssertEqual(options.maxMessageBytes, 1024)
        XCTAssertEqual(options.allowedDirectories, ["/data", "/tmp"])
        XCTAssertEqual(options.shutdownGraceSeconds, 0.5)
        XCTAssertTrue(options.verbose)
    }

    func testSpinMicroseconds() throws {
        guard case .run(let defaults) = try DaemonOptions.parse([]) else { return XCTFail() }
        XCTAssertEqual(defaults.spinMicroseconds, 40)
        guard case .run(let off) = try DaemonOptions.parse(["--spin-us", "0"]) else { return XCTFail() }
        XCTAssertEqual(off.spinMicroseconds, 0)
        guard case .run(let long) = try DaemonOptions.parse(["--spin-us=250"]) else { return XCTFail() }
        XCTAssertEqual(long.spinMicroseconds, 250)
        for bad in ["-1", "10001", "x", "1.5"] {
            XCTAssertThrowsError(try DaemonOptions.parse(["--spin-us", bad]), bad)
        }
    }

    func testStubsAndOffline() throws {
        guard case .run(let defaults) = try DaemonOptions.parse([]) else { return XCTFail() }
        XCTAssertNil(defaults.stubsFile)
        XCTAssertFalse(defaults.offline)
        guard case .run(let o) = try DaemonOptions.parse(["--stubs", "/t/stubs.har", "--offline"]) else { return XCTFail() }
        XCTAssertEqual(o.stubsFile, "/t/stubs.har")
        XCTAssertTrue(o.offline)
        XCTAssertThrowsError(try DaemonOptions.parse(["--stubs"]))
        XCTAssertTrue(DaemonOptions.helpText.contains("--stubs FILE"))
        XCTAssertTrue(DaemonOptions.helpText.contains("--offline"))
    }

    func testHelpVersionAndMistakes() {
        XCTAssertEqual(try DaemonOptions.parse(["--help"]), .help)
        XCTAssertEqual(try DaemonOptions.parse(["--version"]), .version)
        XCTAssertThrowsError(try DaemonOptions.parse(["--sockett", "/x"]))
        XCTAssertThrowsError(try DaemonOptions.parse(["--socket"]))
        XCTAssertThrowsError(try DaemonOptions.parse(["--max-message-bytes", "ten"]))
        XCTAssertTrue(DaemonOptions.helpText.contains("--socket PATH"))
    }
}
