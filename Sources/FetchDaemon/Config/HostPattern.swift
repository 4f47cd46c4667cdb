/// How limits name hosts: `name`, `name:port`, or `*` for hosts without their own entry.
enum HostPattern {
    /// `name` or `name:port`: letters, digits, dots, dashes, or an IPv6 literal in brackets.
    static func isValid(_ text: String) -> Bool {
        if text == "*" { return true }
        guard !text.isEmpty, text.utf8.count <= 300 else { return false }
        var name = Substring(text)
        if let colon = text.lastIndex(of: ":"), !text.hasSuffix("]") {
            guard let port = Int(text[text.index(after: colon)...]), (1...65535).contains(port) else { return false }
            name = text[..<colon]
        }
        if name.hasPrefix("[") {
            return name.hasSuffix("]") && name.dropFirst().dropLast().allSatisfy { $0.isHexDigit || $0 == ":" || $0 == "." }
        }
        return !name.isEmpty && name.allSatisfy { ($0.isASCII && ($0.isLetter || $0.isNumber)) || $0 == "-" || $0 == "." || $0 == "_" }
    }
}
