internal import CCurl
import FoundationEssentials
import Glibc
import Synchronization

/// The named cookie jars: one libcurl share (CURL_LOCK_DATA_COOKIE) per name, created when
/// a request first names it. libcurl's cookie engine does the RFC 6265 work (parsing
/// Set-Cookie, public-suffix refusal, replacing, expiring); this type only attaches jars to
/// transfers and reads and writes them as Netscape lines.
///
/// Shared by both engine threads (`SharedCookieJars` holds it behind a lock): libcurl locks
/// each share itself (`fetchd_share_new`), for the cookie reads and writes of transfers
/// running on either thread.
final class CookieJars {
    private var shares: [String: (share: UnsafeMutableRawPointer, locks: UnsafeMutableRawPointer?)] = [:]
    /// An easy handle never performed, used to read and edit a jar (CURLINFO_COOKIELIST,
    /// CURLOPT_COOKIELIST) by attaching it to that jar's share.
    private var editor: UnsafeMutableRawPointer?
    /// Per jar, each cookie's place in the order the jar first got it (name, domain, path):
    /// RFC 6265 5.4 sends earlier-created cookies first among equal paths, where libcurl
    /// (lib/cookie.c cookie_sort, 7.88) puts its newest first. See `keepCreationOrder`.
    private var created: [String: [String: UInt64]] = [:]
    private var nextCreated: UInt64 = 0
    /// Per jar, the names its cookies had at the last listing.
    private var names: [String: Set<String>] = [:]

    /// Points a transfer's handle at its jar, or at none. Always set, because a pooled
    /// handle keeps its previous share across curl_easy_reset.
    func attach(_ easy: UnsafeMutableRawPointer, jar name: String?) {
        guard let name, let share = share(named: name, create: true) else {
            fetchd_easy_setopt_ptr(easy, CURLOPT_SHARE, nil)
            return
        }
        fetchd_easy_setopt_ptr(easy, CURLOPT_SHARE, share)
        // An empty file name turns the cookie engine on without reading any file.
        fetchd_easy_setopt_str(easy, CURLOPT_COOKIEFILE, "")
    }

    /// Resets a handle for the pool (curl_easy_reset), its cookie file list freed first.
    /// libcurl 7.88's reset forgets that list without freeing it (curl/curl#10709, fixed in
    /// 8.0), and `attach` adds a name to it for every request: 64 bytes of heap lost per
    /// request without this (5 MB after the bench's load). The next `attach` turns the
    /// cookie engine on again.
    static func reset(_ easy: UnsafeMutableRawPointer) {
        detach(easy)
        curl_easy_reset(easy)
    }

    /// Frees the handle's cookie file list: before a reset, and before a reused handle is
    /// attached to another jar (`attach` sets the share and the list again).
    static func detach(_ easy: UnsafeMutableRawPointer) {
        fetchd_easy_setopt_str(easy, CURLOPT_COOKIEFILE, nil)
    }

    /// Every cookie in the jar, expired or not (libcurl purges lazily). Unknown jar: none.
    func cookies(in name: String) -> [Cookie] {
        guard let share = share(named: name, create: false), let editor = editor(on: share) else { return [] }
        var list: UnsafeMutablePointer<curl_slist>? = nil
        guard fetchd_easy_getinfo_slist(editor, CURLINFO_COOKIELIST, &list) == CURLE_OK else { return [] }
        defer { curl_slist_free_all(list) }
        var cookies: [Cookie] = []
        var node = list
        while let current = node {
            if let data = current.pointee.data,
               let cookie = try? Cookie.parse(netscapeLine: Substring(String(cString: data))) {
                cookies.append(cookie)
            }
            node = current.pointee.next
        }
        return cookies
    }

    /// Adds or replaces cookies, as if read from a cookie file; those new to the jar are
    /// taken as created in the order given.
    func store(_ cookies: [Cookie], in name: String) {
        add(cookies, in: name)
        keepCreationOrder(name, arrived: cookies.map(\.name))
    }

    private func add(_ cookies: [Cookie], in name: String) {
        guard !cookies.isEmpty, let share = share(named: name, create: true), let editor = editor(on: share) else { return }
        for cookie in cookies {
            fetchd_easy_setopt_str(editor, CURLOPT_COOKIELIST, cookie.netscapeLine)
        }
    }

    /// Empties the jar.
    func clear(_ name: String) {
        created[name] = nil
        names[name] = nil
        guard let share = share(named: name, create: false), let editor = editor(on: share) else { return }
        fetchd_easy_setopt_str(editor, CURLOPT_COOKIELIST, "ALL")
    }

    /// After cookies may have been added (a transfer's Set-Cookie, `store`): numbers the
    /// cookies new to the jar in the order they arrived (`arrived`: the names in Set-Cookie
    /// order; others, from earlier redirect hops, before them by name), and when there are
    /// new ones, loads the jar again newest first. libcurl stamps each cookie it adds with a
    /// rising counter and sends the highest first among equal path, domain and name lengths,
    /// so the oldest is then sent first, as RFC 6265 5.4 asks. A replaced cookie keeps its
    /// place (5.3 step 11.3).
    func keepCreationOrder(_ name: String, arrived: [String]) {
        // Listing the jar costs as much as the jar is big: skipped when every name that came
        // is one the jar already had (a cookie replaced keeps its place). A new cookie of a
        // known name, or one set by a redirect's hop only, is numbered at the next listing.
        guard !arrived.isEmpty, !arrived.allSatisfy({ names[name]?.contains($0) ?? false }) else { return }
        let cookies = cookies(in: name)
        names[name] = Set(cookies.map(\.name))
        var order = created[name] ?? [:]
        let key = Self.key
        let fresh = cookies.filter { order[key($0)] == nil }
        guard !fresh.isEmpty else { return }
        let position = Dictionary(arrived.enumerated().map { ($1, $0) }, uniquingKeysWith: { first, _ in first })
        for cookie in fresh.sorted(by: { a, b in
            let pa = position[a.name] ?? -1, pb = position[b.name] ?? -1
            return pa != pb ? pa < pb : a.name < b.name
        }) {
            order[key(cookie)] = nextCreated
            nextCreated += 1
        }
        let live = Set(cookies.map(key))
        created[name] = order.filter { live.contains($0.key) }
        // Only cookies of a new one's domain can tie with it: of the cookies one request
        // sends, those of equal domain length share the domain. Those alone are put back
        // (an expiry in the past deletes one cookie), so the cost is the domain's, not the jar's.
        let domains = Set(fresh.map(\.domain))
        let affected = cookies.filter { domains.contains($0.domain) }
        guard affected.count > 1 else { return }
        add(affected.map { var gone = $0; gone.expires = 1; return gone }, in: name)
        add(affected.sorted { (order[key($0)] ?? 0) > (order[key($1)] ?? 0) }, in: name)
    }

    private static func key(_ cookie: Cookie) -> String { "\(cookie.name)\t\(cookie.domain)\t\(cookie.path)" }

    /// Keeps only `kept` in the jar (libcurl cannot delete one cookie), in creation order.
    func keepOnly(_ kept: [Cookie], in name: String) {
        reload(kept, in: name)
    }

    /// Empties the jar and adds `cookies` back newest first (see `keepCreationOrder`).
    private func reload(_ cookies: [Cookie], in name: String) {
        guard let share = share(named: name, create: false), let editor = editor(on: share) else { return }
        let key = Self.key
        let live = Set(cookies.map(key))
        let order = (created[name] ?? [:]).filter { live.contains($0.key) }
        created[name] = order
        fetchd_easy_setopt_str(editor, CURLOPT_COOKIELIST, "ALL")
        add(cookies.sorted { (order[key($0)] ?? 0) > (order[key($1)] ?? 0) }, in: name)
    }

    /// Frees every share. Handles attached to them must have been cleaned up first.
    func close() {
        if let editor { curl_easy_cleanup(editor) }
        editor = nil
        for (share, locks) in shares.values { fetchd_share_free(share, locks) }
        shares.removeAll()
        created.removeAll()
        names.removeAll()
    }

    /// Whether a finished transfer may have stored cookies: a Set-Cookie in its last
    /// response, or redirects (whose hops' headers are not kept). A false positive costs one
    /// look at the jar; a miss would delay persisting until the next change.
    static func mayHaveChanged(_ transfer: Transfer, easy: UnsafeMutableRawPointer) -> Bool {
        if transfer.responseHeaders.contains(named: "set-cookie") { return true }
        var redirects = 0
        fetchd_easy_getinfo_long(easy, CURLINFO_REDIRECT_COUNT, &redirects)
        return redirects > 0
    }

    private func share(named name: String, create: Bool) -> UnsafeMutableRawPointer? {
        if let known = shares[name] { return known.share }
        var locks: UnsafeMutableRawPointer? = nil
        guard create, let share = fetchd_share_new(Int(CURL_LOCK_DATA_COOKIE.rawValue), &locks) else { return nil }
        shares[name] = (share, locks)
        return share
    }

    private func editor(on share: UnsafeMutableRawPointer) -> UnsafeMutableRawPointer? {
        if editor == nil { editor = curl_easy_init() }
        guard let editor else { return nil }
        fetchd_easy_setopt_ptr(editor, CURLOPT_SHARE, share)
        return editor
    }
}

/// The cookie jars of both engine threads, behind one lock; closed when the last thread
/// using them has stopped.
final class SharedCookieJars: Sendable {
    private let jars = Locked(CookieJars())
    private let users: Atomic<Int>

    init(users: Int) {
        self.users = Atomic(users)
    }

    func withJars<Result>(_ body: (CookieJars) -> Result) -> Result {
        jars.withLock { body($0) }
    }

    /// A thread is done with the jars (its handles cleaned up); the last one frees the shares.
    func release() {
        if users.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 { jars.withLock { $0.close() } }
    }
}
