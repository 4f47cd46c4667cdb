import FetchEngine
import JSONRPC
import XCTest

@testable import FetchDaemon

final class MetricsTests: XCTestCase {
    func testTheFirstHundredHostsKeepTheirSlotsTheRestAreOther() {
        let slots = HostSlots()
        for index in 0..<HostSlots.capacity {
            XCTAssertEqual(slots.slot(for: HostKey(scheme: "https", name: "h\(index).example", port: 443)), index)
        }
        XCTAssertEqual(slots.slot(for: HostKey(scheme: "https", name: "late.example", port: 443)), HostSlots.capacity)
        XCTAssertEqual(slots.slot(for: HostKey(scheme: "https", name: "h7.example", port: 443)), 7)
        // The port and the scheme are part of the host.
        XCTAssertEqual(slots.slot(for: HostKey(scheme: "http", name: "h7.example", port: 80)), HostSlots.capacity)
        XCTAssertEqual(slots.count, HostSlots.capacity)
    }

    func testDurationsFallInOpenTelemetrysBuckets() {
        let metrics = Metrics()
        let slot = metrics.hosts.slot(for: HostKey(scheme: "https", name: "a.example", port: 443))
        metrics.observe(slot: slot, status: 200, microseconds: 5_000)  // le 0.005 (bounds are inclusive)
        metrics.observe(slot: slot, status: 204, microseconds: 5_001)  // le 0.01
        metrics.observe(slot: slot, status: 503, microseconds: 20_000_000)  // +Inf
        metrics.observe(slot: slot, status: nil, microseconds: 1)
        let series = metrics.durationSeries()
        XCTAssertEqual(series.map(\.statusClass), ["2xx", "5xx", "error"])
        XCTAssertEqual(series[0].buckets[0], 1)
        XCTAssertEqual(series[0].buckets[1], 1)
        XCTAssertEqual(series[0].count, 2)
        XCTAssertEqual(series[0].sumMicroseconds, 10_001)
        XCTAssertEqual(series[1].buckets.last, 1)
    }

    func testPrometheusTextIsCumulativeAndEscapesLabels() {
        var sample = MetricFamily.Sample(labels: [("server_address", "a\"b\\c")], buckets: [1, 2] + Array(repeating: 0, count: 13), sum: 0.25)
        sample.value = 0
        let text = MetricsReport.prometheusText([
            MetricFamily("d_seconds", .histogram, "Durations.", samples: [sample]),
            MetricFamily("c_total", .counter, "A count.", value: 3),
        ])
        XCTAssertTrue(text.contains("# TYPE d_seconds histogram\n"))
        XCTAssertTrue(text.contains("d_seconds_bucket{server_address=\"a\\\"b\\\\c\",le=\"0.005\"} 1\n"))
        XCTAssertTrue(text.contains("d_seconds_bucket{server_address=\"a\\\"b\\\\c\",le=\"0.01\"} 3\n"))
        XCTAssertTrue(text.contains("d_seconds_bucket{server_address=\"a\\\"b\\\\c\",le=\"+Inf\"} 3\n"))
        XCTAssertTrue(text.contains("d_seconds_sum{server_address=\"a\\\"b\\\\c\"} 0.25\n"))
        XCTAssertTrue(text.contains("d_seconds_count{server_address=\"a\\\"b\\\\c\"} 3\n"))
        XCTAssertTrue(text.hasSuffix("# HELP c_total A count.\n# TYPE c_total counter\nc_total 3\n"))
    }
}

final class ConfigFileTests: XCTestCase {
    func testFlagsOverTheFileAndUnknownKeysNamed() throws {
        let options = try ConfigFile.options(path: "/c.json", text: #"{"maxPerHost": 3, "allowDir": ["/a"], "verbose": true}"#,
                                             arguments: ["--max-per-host", "5", "--config", "/c.json"])
        XCTAssertEqual(options.maxPerHost, 5)
        XCTAssertEqual(options.allowedDirectories, ["/a"])
        XCTAssertTrue(options.verbose)
        XCTAssertEqual(options.configPath, "/c.json")
        XCTAssertThrowsError(try ConfigFile.options(path: "/c.json", text: #"{"rateLimitz": []}"#, arguments: [])) { error in
            XCTAssertEqual((error as? ConfigFile.Invalid)?.description, "--config /c.json: rateLimitz: unknown key")
        }
        XCTAssertThrowsError(try ConfigFile.options(path: "/c.json", text: #"{"rate": ["x.example=0"]}"#, arguments: [])) { error in
            XCTAssertTrue((error as? ConfigFile.Invalid)?.description.contains("rate[0]: --rate takes") ?? false, "\(error)")
        }
    }

    func testChangedNamesTheSettingsThatDiffer() throws {
        guard case .run(let old) = try DaemonOptions.parse(["--spin-us", "10"]),
              case .run(let new) = try DaemonOptions.parse(["--spin-us", "20", "--max-per-host", "2"]) else { return XCTFail() }
        XCTAssertEqual(DaemonOptions.changed(from: old, to: new).map(\.key).sorted(), ["maxPerHost", "spinUs"])
    }
}
