/// A set of bytes, as four 64-bit words.
struct ByteSet: Sendable, Equatable {
    private var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)

    init() {}

    init(_ byte: UInt8) {
        insert(byte)
    }

    static var all: ByteSet {
        var set = ByteSet()
        set.words = (.max, .max, .max, .max)
        return set
    }

    func contains(_ byte: UInt8) -> Bool {
        let bit = UInt64(1) << UInt64(byte & 63)
        switch byte >> 6 {
        case 0: return words.0 & bit != 0
        case 1: return words.1 & bit != 0
        case 2: return words.2 & bit != 0
        default: return words.3 & bit != 0
        }
    }

    mutating func insert(_ byte: UInt8) {
        let bit = UInt64(1) << UInt64(byte & 63)
        switch byte >> 6 {
        case 0: words.0 |= bit
        case 1: words.1 |= bit
        case 2: words.2 |= bit
        default: words.3 |= bit
        }
    }

    mutating func formUnion(_ other: ByteSet) {
        words = (words.0 | other.words.0, words.1 | other.words.1, words.2 | other.words.2, words.3 | other.words.3)
    }

    var inverted: ByteSet {
        var set = ByteSet()
        set.words = (~words.0, ~words.1, ~words.2, ~words.3)
        return set
    }

    func removing(_ byte: UInt8) -> ByteSet {
        var set = self
        let bit = UInt64(1) << UInt64(byte & 63)
        if byte >> 6 == 0 { set.words.0 &= ~bit }
        if byte >> 6 == 1 { set.words.1 &= ~bit }
        if byte >> 6 == 2 { set.words.2 &= ~bit }
        if byte >> 6 == 3 { set.words.3 &= ~bit }
        return set
    }

    /// The only member, when there is exactly one.
    var single: UInt8? {
        let counts = [words.0.nonzeroBitCount, words.1.nonzeroBitCount, words.2.nonzeroBitCount, words.3.nonzeroBitCount]
        guard counts.reduce(0, +) == 1, let word = counts.firstIndex(of: 1) else { return nil }
        let value = [words.0, words.1, words.2, words.3][word]
        return UInt8(word * 64 + value.trailingZeroBitCount)
    }

    static func == (a: ByteSet, b: ByteSet) -> Bool {
        a.words == b.words
    }

    /// `\w`: letters, digits and `_`.
    static var word: ByteSet {
        var set = posixClass("alnum")!
        set.insert(UInt8(ascii: "_"))
        return set
    }

    /// A POSIX class of the C locale (`[:alpha:]` ...), or nil for an unknown name.
    static func posixClass(_ name: String) -> ByteSet? {
        let test: (UInt8) -> Bool
        switch name {
        case "alpha": test = { isLetter($0) }
        case "digit": test = { isDigit($0) }
        case "alnum": test = { isLetter($0) || isDigit($0) }
        case "upper": test = { $0 >= 65 && $0 <= 90 }
        case "lower": test = { $0 >= 97 && $0 <= 122 }
        case "space": test = { $0 == 32 || ($0 >= 9 && $0 <= 13) }
        case "blank": test = { $0 == 32 || $0 == 9 }
        case "punct": test = { $0 >= 33 && $0 <= 126 && !isLetter($0) && !isDigit($0) }
        case "print": test = { $0 >= 32 && $0 <= 126 }
        case "graph": test = { $0 >= 33 && $0 <= 126 }
        case "cntrl": test = { $0 < 32 || $0 == 127 }
        case "xdigit": test = { isDigit($0) || ($0 | 0x20 >= 97 && $0 | 0x20 <= 102) }
        default: return nil
        }
        var set = ByteSet()
        for byte in UInt8.min...UInt8.max where test(byte) { set.insert(byte) }
        return set
    }

    private static func isLetter(_ byte: UInt8) -> Bool { byte | 0x20 >= 97 && byte | 0x20 <= 122 }
    private static func isDigit(_ byte: UInt8) -> Bool { byte >= 48 && byte <= 57 }
}
