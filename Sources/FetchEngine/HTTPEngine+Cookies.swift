import FoundationEssentials
import Glibc

/// The cookie jars, read and edited on the engine thread between transfer steps, so a
/// request never sees a jar half-changed. Jars are named; a request names its jar in
/// `HTTPRequest.cookieJar`. Expired cookies are never returned.
extension HTTPEngine {
    /// `handler` runs on the engine thread, with the name of a jar that a finished transfer
    /// may have changed. It must return quickly (schedule work elsewhere).
    public func observeCookieChanges(_ handler: @escaping @Sendable (_ jar: String) -> Void) {
        loop.cookieObserver.withLock { $0 = handler }
    }

    /// The live cookies of a jar (none for a jar nobody has used).
    public func cookies(inJar jar: String, completion: @escaping @Sendable ([Cookie]) -> Void) {
        loop.submit(.cookies { jars in
            let now = Self.unixNow()
            completion(jars.cookies(in: jar).filter { !$0.isExpired(now: now) })
        })
    }

    public func cookies(inJar jar: String) async -> [Cookie] {
        await withCheckedContinuation { continuation in
            cookies(inJar: jar) { continuation.resume(returning: $0) }
        }
    }

    /// Adds or replaces cookies (same name, domain and path) and returns how many of them
    /// the jar now holds: libcurl refuses some (a `__Host-` cookie that is not host-only,
    /// say), and an expiry in the past deletes rather than stores.
    public func store(_ cookies: [Cookie], inJar jar: String, completion: @escaping @Sendable (Int) -> Void) {
        loop.submit(.cookies { jars in
            jars.store(cookies, in: jar)
            self.loop.notifyCookiesChanged(jar)
            let now = Self.unixNow()
            var held: [String: String] = [:]
            for cookie in jars.cookies(in: jar) where !cookie.isExpired(now: now) {
                held[Self.identity(cookie)] = cookie.value
            }
            completion(cookies.filter { held[Self.identity($0)] == $0.value }.count)
        })
    }

    public func store(_ cookies: [Cookie], inJar jar: String) async -> Int {
        await withCheckedContinuation { continuation in
            store(cookies, inJar: jar) { continuation.resume(returning: $0) }
        }
    }

    /// Removes every cookie of the jar, or those of `domain` and its subdomains; returns
    /// how many live cookies were removed.
    public func clearCookies(inJar jar: String, domain: String?) async -> Int {
        await withCheckedContinuation { continuation in
            loop.submit(.cookies { jars in
                let now = Self.unixNow()
                let live = jars.cookies(in: jar).filter { !$0.isExpired(now: now) }
                guard let domain else {
                    jars.clear(jar)
                    self.loop.notifyCookiesChanged(jar)
                    continuation.resume(returning: live.count)
                    return
                }
                let removed = live.filter { $0.isWithin(domain: domain) }
                if !removed.isEmpty {
                    // libcurl cannot delete one cookie: empty the jar and put the rest back.
                    jars.keepOnly(live.filter { !$0.isWithin(domain: domain) }, in: jar)
                    self.loop.notifyCookiesChanged(jar)
                }
                continuation.resume(returning: removed.count)
            })
        }
    }

    static func unixNow() -> Int64 { Int64(Date().timeIntervalSince1970) }

    private static func identity(_ cookie: Cookie) -> String {
        "\(cookie.name)\t\(cookie.domain)\t\(cookie.path)\t\(cookie.hostOnly)"
    }
}

extension EngineLoop {
    /// Engine thread: tells the observer, if any, that `jar` may have changed.
    func notifyCookiesChanged(_ jar: String) {
        assert(isCurrent, "cookie changes are told on the engine thread")
        cookieObserver.withLock { $0 }?(jar)
    }
}
