/// Percent-encoding for query strings and form bodies (RFC 3986 unreserved characters
/// pass; everything else is encoded byte by byte from UTF-8).
public enum URLEncoding {
    /// `a=1&b=two%20words`
    public static func query(_ items: [(String, String)]) -> String {
        items.map { "\(encode($0.0, spaceAsPlus: false))=\(encode($0.1, spaceAsPlus: false))" }
            .joined(separator: "&")
    }

    /// application/x-www-form-urlencoded: as a query, but a space is `+`.
    public static func form(_ items: [(String, String)]) -> String {
        items.map { "\(encode($0.0, spaceAsPlus: true))=\(encode($0.1, spaceAsPlus: true))" }
            .joined(separator: "&")
    }

    /// Appends encoded items to a URL's own query, before any fragment.
    public static func appendingQuery(_ items: [(String, String)], to url: String) -> String {
        guard !items.isEmpty else { return url }
        var base = url
        var fragment = ""
        if let hash = url.firstIndex(of: "#") {
            base = String(url[..<hash])
            fragment = String(url[hash...])
        }
        let separator: String
        if !base.contains("?") {
            separator = "?"
        } else if base.hasSuffix("?") || base.hasSuffix("&") {
            separator = ""
        } else {
            separator = "&"
        }
        return base + separator + query(items) + fragment
    }

    public static func encode(_ text: String, spaceAsPlus: Bool) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(text.utf8.count)
        let hex = Array("0123456789ABCDEF".utf8)
        for byte in text.utf8 {
            if isUnreserved(byte) {
                out.append(byte)
            } else if byte == UInt8(ascii: " ") && spaceAsPlus {
                out.append(UInt8(ascii: "+"))
            } else {
                out.append(UInt8(ascii: "%"))
                out.append(hex[Int(byte >> 4)])
                out.append(hex[Int(byte & 0x0F)])
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// `%XX` sequences decoded; nil when one is malformed or the bytes are not UTF-8
    /// (Foundation's `removingPercentEncoding`).
    public static func decode(_ text: String) -> String? {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count)
        var iterator = text.utf8.makeIterator()
        while let byte = iterator.next() {
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else { return nil }
            bytes.append(high << 4 | low)
        }
        return String(validating: bytes, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    private static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."),
            UInt8(ascii: "_"), UInt8(ascii: "~"):
            true
        default: false
        }
    }
}
