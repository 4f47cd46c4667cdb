import FetchEngine
import XCTest

@testable import FetchDaemon

/// The Redis keys of a shared limit: every key of a host carries the same hash tag, so a Redis
/// Cluster keeps them in one slot and one script can touch them all.
final class SharedLimitKeysTests: XCTestCase {
    /// What a Cluster hashes: the text between the first `{` and the next `}` when it is not
    /// empty, else the whole key.
    private func hashTag(_ key: String) -> Substring {
        guard let open = key.firstIndex(of: "{"), let close = key[key.index(after: open)...].firstIndex(of: "}"),
              close > key.index(after: open) else { return Substring(key) }
        return key[key.index(after: open)..<close]
    }

    func testEveryKeyOfAHostHasTheHostAsItsTag() {
        let host = HostKey(scheme: "https", name: "api.partner.com", port: 443)
        let keys = SharedLimitScripts.keys(host)
        for key in [keys.tat, keys.leases, keys.pause] {
            XCTAssertTrue(key.hasPrefix("fetchd:"), key)
            XCTAssertEqual(hashTag(key), "https://api.partner.com:443", key)
        }
        XCTAssertEqual(keys.tat, "fetchd:{https://api.partner.com:443}:tat")
    }

    func testHostsDifferInTheirTags() {
        let a = SharedLimitScripts.keys(HostKey(scheme: "https", name: "api.partner.com", port: 443))
        let b = SharedLimitScripts.keys(HostKey(scheme: "http", name: "api.partner.com", port: 80))
        XCTAssertNotEqual(hashTag(a.tat), hashTag(b.tat), "another host key may sit on another shard")
    }
}
