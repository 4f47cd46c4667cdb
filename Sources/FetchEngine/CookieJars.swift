internal import CCurl
import FoundationEssentials
import Glibc

/// The named cookie jars: one libcurl share (CURL_LOCK_DATA_COOKIE) per name, created when
/// a request first names it. libcurl's cookie engine does the RFC 6265 work (parsing
/// Set-Cookie, public-suffix refusal, replacing, expiring); this type only attaches jars to
/// transfers and reads and writes them as Netscape lines.
///
/// Engine thread only: every transfer and every cookie command runs there, so the shares
/// need no lock callbacks.
final class CookieJars {
    private var shares: [String: UnsafeMutableRawPointer] = [:]
    /// An easy handle never performed, used to read and edit a jar (CURLINFO_COOKIELIST,
    /// CURLOPT_COOKIELIST) by attaching it to that jar's share.
    private var editor: UnsafeMutableRawPointer?

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

    /// Adds or replaces cookies, as if read from a cookie file.
    func store(_ cookies: [Cookie], in name: String) {
        guard !cookies.isEmpty, let share = share(named: name, create: true), let editor = editor(on: share) else { return }
        for cookie in cookies {
            fetchd_easy_setopt_str(editor, CURLOPT_COOKIELIST, cookie.netscapeLine)
        }
    }

    /// Empties the jar.
    func clear(_ name: String) {
        guard let share = share(named: name, create: false), let editor = editor(on: share) else { return }
        fetchd_easy_setopt_str(editor, CURLOPT_COOKIELIST, "ALL")
    }

    /// Frees every share. Handles attached to them must have been cleaned up first.
    func close() {
        if let editor { curl_easy_cleanup(editor) }
        editor = nil
        for share in shares.values { curl_share_cleanup(share) }
        shares.removeAll()
    }

    /// Whether a finished transfer may have stored cookies: a Set-Cookie in its last
    /// response, or redirects (whose hops' headers are not kept). A false positive costs one
    /// look at the jar; a miss would delay persisting until the next change.
    static func mayHaveChanged(_ transfer: Transfer, easy: UnsafeMutableRawPointer) -> Bool {
        if transfer.responseHeaders.contains(where: { $0.name.caseInsensitiveEquals("set-cookie") }) { return true }
        var redirects = 0
        fetchd_easy_getinfo_long(easy, CURLINFO_REDIRECT_COUNT, &redirects)
        return redirects > 0
    }

    private func share(named name: String, create: Bool) -> UnsafeMutableRawPointer? {
        if let share = shares[name] { return share }
        guard create, let share = curl_share_init() else { return nil }
        fetchd_share_setopt_long(share, CURLSHOPT_SHARE, Int(CURL_LOCK_DATA_COOKIE.rawValue))
        shares[name] = share
        return share
    }

    private func editor(on share: UnsafeMutableRawPointer) -> UnsafeMutableRawPointer? {
        if editor == nil { editor = curl_easy_init() }
        guard let editor else { return nil }
        fetchd_easy_setopt_ptr(editor, CURLOPT_SHARE, share)
        return editor
    }
}
