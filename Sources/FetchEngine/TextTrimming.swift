extension StringProtocol {
    /// The text without leading and trailing spaces and tabs (Foundation's
    /// `trimmingCharacters(in: .whitespaces)`: blanks, not line breaks).
    public func trimmingBlanks() -> String {
        func isBlank(_ c: Character) -> Bool { c == " " || c == "\t" || (c.isWhitespace && !c.isNewline) }
        guard let first = firstIndex(where: { !isBlank($0) }) else { return "" }
        let last = lastIndex(where: { !isBlank($0) })!
        return String(self[first...last])
    }
}
