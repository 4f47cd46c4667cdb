/// The two path manipulations the daemon needs, with NSString's rules (trailing slashes
/// ignored; the root stays "/"), without Foundation.
enum PathText {
    /// "/a/b/c" -> "c"; "/a/b/" -> "b"; "/" -> "/"; "c" -> "c".
    static func lastComponent(of path: String) -> String {
        let trimmed = withoutTrailingSlashes(path)
        if trimmed == "/" { return "/" }
        guard let slash = trimmed.lastIndex(of: "/") else { return trimmed }
        return String(trimmed[trimmed.index(after: slash)...])
    }

    /// "/a/b/c" -> "/a/b"; "/a" -> "/"; "/" -> "/"; "c" -> "".
    static func directory(of path: String) -> String {
        let trimmed = withoutTrailingSlashes(path)
        if trimmed == "/" { return "/" }
        guard let slash = trimmed.lastIndex(of: "/") else { return "" }
        let parent = withoutTrailingSlashes(String(trimmed[..<slash]))
        return parent.isEmpty ? "/" : parent
    }

    private static func withoutTrailingSlashes(_ path: String) -> String {
        guard path.count > 1 else { return path }
        var end = path.endIndex
        while end > path.index(after: path.startIndex), path[path.index(before: end)] == "/" { end = path.index(before: end) }
        return String(path[..<end])
    }
}
