import FetchEngine

/// The one rule for secrets in URLs, used by HAR files, the diagnostic log and every error
/// message (docs/logging.md, "What is redacted"):
///
/// - the password of the userinfo (`http://user:PASS@host/`) is always masked;
/// - the value of every query or fragment parameter with a secret name (`isSecretName`) is
///   masked.
///
/// The mask is `<redacted>` percent-encoded (`%3Credacted%3E`), so that the URL stays a URL.
/// This is pure text work: no parsing that could fail, no allocation for text without a URL.
enum URLRedaction {
    static let mask = "<redacted>"
    static let encodedMask = "%3Credacted%3E"

    /// Names that are secret as a whole, compared lowercased: tokens, keys, passwords, OAuth
    /// codes and assertions, session ids, and the signatures and credentials of pre-signed
    /// URLs (AWS SigV4, Google Cloud Storage, Azure SAS).
    static let secretNames: Set<String> = [
        "access_token", "id_token", "refresh_token", "token", "jwt", "assertion", "client_assertion",
        "api_key", "apikey", "key", "private_key", "password", "passwd", "pass", "pwd", "secret",
        "client_secret", "code", "otp", "auth", "session", "sessionid", "session_id", "sid",
        "jsessionid", "phpsessid", "sig", "signature", "x-amz-signature", "x-amz-credential",
        "x-amz-security-token", "x-goog-signature", "x-goog-credential",
    ]
    /// A name is also secret when, lowercased, it contains one of these.
    static let secretNameParts = ["password", "passwd", "secret", "token", "api_key", "apikey", "signature", "credential"]

    /// Whether a field of this name holds a secret: in a query, a form, JSON or multipart.
    static func isSecretName(_ name: String) -> Bool {
        let lower = name.lowercased()
        return secretNames.contains(lower) || secretNameParts.contains { lower.contains($0) }
    }

    /// `url` with its userinfo password and the values of its secret parameters masked.
    /// Relative URLs (a `Location: /cb?code=...`) are handled too.
    static func redact(_ url: String) -> String {
        guard let redacted = redactBytes(Array(url.utf8)) else { return url }
        return String(decoding: redacted, as: UTF8.self)
    }

    /// The secret values `redact` masks in `url`, decoded (the password, the parameters).
    static func secrets(in url: String, depth: Int = 0) -> [String] {
        var found: [String] = []
        if let password = userinfoPassword(Array(url.utf8)) {
            found.append(password)
        }
        for (name, value) in parameters(of: url) {
            if isSecretName(name) {
                found.append(value)
            } else if depth < nestedURLDepth, value.utf8.contains(where: mayStartURLParts) {
                found += secrets(in: value, depth: depth + 1)
            }
        }
        return found
    }

    /// Free text with every absolute URL in it (`scheme://...`, up to a blank, a quote or
    /// `<`/`>`) redacted.
    static func redactURLs(in text: String) -> String {
        guard text.utf8.contains(UInt8(ascii: ":")) else { return text }
        let bytes = Array(text.utf8)
        var out: [UInt8] = []
        var copied = 0
        var index = 0
        while index + 2 < bytes.count {
            guard bytes[index] == UInt8(ascii: ":"), bytes[index + 1] == UInt8(ascii: "/"),
                  bytes[index + 2] == UInt8(ascii: "/") else {
                index += 1
                continue
            }
            var start = index
            while start > copied, isSchemeByte(bytes[start - 1]) { start -= 1 }
            // A scheme starts with a letter.
            while start < index, !isLetter(bytes[start]) { start += 1 }
            var end = index + 3
            while end < bytes.count, !endsURL(bytes[end]) { end += 1 }
            if start < index, let redacted = redactBytes(Array(bytes[start..<end])) {
                out.append(contentsOf: bytes[copied..<start])
                out.append(contentsOf: redacted)
                copied = end
            }
            index = end
        }
        guard copied > 0 else { return text }
        out.append(contentsOf: bytes[copied...])
        return String(decoding: out, as: UTF8.self)
    }

    // MARK: the work, on UTF-8 bytes

    /// How deep URLs inside parameter values are looked into.
    static let nestedURLDepth = 3

    /// The redacted bytes, or nil when nothing in `url` is secret. A parameter whose value
    /// is itself a URL (`?next=https%3A%2F%2Fh%2F%3Fsig%3D...`, a redirect target) has the
    /// rule applied to that URL too, and is then written percent-encoded.
    private static func redactBytes(_ url: [UInt8], depth: Int = 0) -> [UInt8]? {
        if depth > 0, !url.contains(where: mayStartURLParts) { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(url.count)
        var changed = false
        var position = 0
        if let (passwordStart, passwordEnd) = passwordRange(url) {
            out.append(contentsOf: url[..<passwordStart])
            out.append(contentsOf: encodedMask.utf8)
            position = passwordEnd
            changed = true
        }
        while position < url.count, url[position] != UInt8(ascii: "?"), url[position] != UInt8(ascii: "#") {
            out.append(url[position])
            position += 1
        }
        // The query (after ?, up to #) and the fragment (after #) are both name=value lists.
        for (opening, stop) in [(UInt8(ascii: "?"), UInt8(ascii: "#")), (UInt8(ascii: "#"), nil)] {
            guard position < url.count, url[position] == opening else { continue }
            out.append(opening)
            position += 1
            while position < url.count, url[position] != stop {
                var end = position
                while end < url.count, url[end] != UInt8(ascii: "&"), url[end] != stop { end += 1 }
                let equals = url[position..<end].firstIndex(of: UInt8(ascii: "="))
                if let equals, equals + 1 < end, isSecretName(decode(url[position..<equals])) {
                    out.append(contentsOf: url[position...equals])
                    out.append(contentsOf: encodedMask.utf8)
                    changed = true
                } else if let equals, equals + 1 < end, depth < nestedURLDepth,
                          let inner = redactBytes(Array(decode(url[(equals + 1)..<end]).utf8), depth: depth + 1) {
                    out.append(contentsOf: url[position...equals])
                    out.append(contentsOf: URLEncoding.encode(String(decoding: inner, as: UTF8.self), spaceAsPlus: false).utf8)
                    changed = true
                } else {
                    out.append(contentsOf: url[position..<end])
                }
                position = end
                if position < url.count, url[position] == UInt8(ascii: "&") {
                    out.append(UInt8(ascii: "&"))
                    position += 1
                }
            }
        }
        out.append(contentsOf: url[position...])
        return changed ? out : nil
    }

    /// Whether the URL carries a userinfo password (`scheme://user:PASS@host`).
    static func hasPassword(_ url: String) -> Bool {
        passwordRange(Array(url.utf8)) != nil
    }

    /// Where the userinfo password is: after `scheme://user:` and before the last `@` of the
    /// authority. Nil without one (or when it is empty).
    private static func passwordRange(_ url: [UInt8]) -> (Int, Int)? {
        guard let separator = schemeSeparatorEnd(url) else { return nil }
        var authorityEnd = separator
        while authorityEnd < url.count, !"/?#".utf8.contains(url[authorityEnd]) { authorityEnd += 1 }
        guard let at = url[separator..<authorityEnd].lastIndex(of: UInt8(ascii: "@")),
              let colon = url[separator..<at].firstIndex(of: UInt8(ascii: ":")), colon + 1 < at else { return nil }
        return (colon + 1, at)
    }

    private static func userinfoPassword(_ url: [UInt8]) -> String? {
        guard let (start, end) = passwordRange(url) else { return nil }
        return decode(url[start..<end])
    }

    /// The index after `scheme://`, when the URL starts with a scheme.
    private static func schemeSeparatorEnd(_ url: [UInt8]) -> Int? {
        guard let first = url.first, isLetter(first) else { return nil }
        var index = 1
        while index < url.count, isSchemeByte(url[index]) { index += 1 }
        guard index + 2 < url.count, url[index] == UInt8(ascii: ":"), url[index + 1] == UInt8(ascii: "/"),
              url[index + 2] == UInt8(ascii: "/") else { return nil }
        return index + 3
    }

    /// The name=value parameters of the query and the fragment, decoded.
    static func parameters(of url: String) -> [(String, String)] {
        var items: [(String, String)] = []
        var rest = Substring(url)
        if let question = rest.firstIndex(of: "?") {
            var query = rest[rest.index(after: question)...]
            if let hash = query.firstIndex(of: "#") { query = query[..<hash] }
            items += Redaction.formItems(String(query))
        }
        if let hash = url.firstIndex(of: "#") {
            rest = url[url.index(after: hash)...]
            if rest.contains("=") { items += Redaction.formItems(String(rest)) }
        }
        return items
    }

    private static func decode(_ bytes: ArraySlice<UInt8>) -> String {
        Redaction.decode(Substring(String(decoding: bytes, as: UTF8.self)))
    }

    /// `?`, `#`, `@`: without one, a parameter's value holds no URL secret.
    private static func mayStartURLParts(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: "?") || byte == UInt8(ascii: "#") || byte == UInt8(ascii: "@")
    }

    private static func isLetter(_ byte: UInt8) -> Bool {
        (byte | 0x20) >= UInt8(ascii: "a") && (byte | 0x20) <= UInt8(ascii: "z")
    }

    private static func isSchemeByte(_ byte: UInt8) -> Bool {
        isLetter(byte) || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
            || byte == UInt8(ascii: "+") || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".")
    }

    /// Where a URL in free text ends: blanks and controls, quotes, angle brackets.
    private static func endsURL(_ byte: UInt8) -> Bool {
        byte <= 0x20 || byte == 0x7F || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "'")
            || byte == UInt8(ascii: "<") || byte == UInt8(ascii: ">") || byte == UInt8(ascii: "`")
    }
}
