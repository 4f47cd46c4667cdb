import FetchEngine
import FoundationEssentials
import Glibc
import JSONRPC

/// `--config FILE`: one JSON object with the command line's settings (each flag's key in
/// `DaemonOptions.table`) and the daemon's setup: `rateLimits` (setRateLimit params),
/// `auth` (setAuth params, as --auth-file), `cookieJars`, `logging` (setLogging params),
/// `cache` and `redis`. An unknown key is refused with its path. Flags on the command line
/// win over the file. A file that is not a JSON object is read as the older rate-limit file
/// (lines of `HOST maxConcurrent=N rps=X burst=N`, rate-limits.md).
public enum ConfigFile {
    /// What the file holds besides the flags' settings, checked for shape at load and
    /// applied by the Daemon (at start, and again on SIGHUP).
    public struct Sections: Sendable, Equatable {
        var rateLimits: [JSONValue] = []
        var auth: [JSONValue] = []
        var logging: JSONValue?
        var cache: JSONValue?
        var redis: JSONValue?
    }

    public struct Invalid: Error, CustomStringConvertible {
        public let description: String
    }

    static let sectionKeys = ["rateLimits", "auth", "cookieJars", "logging", "cache", "redis"]
    static let cacheKeys = ["dir", "maxBytes"]

    /// The most read from a config file.
    static let maxBytes = 4 << 20

    /// The file's text, or why it cannot be read (the C library's words). Read through the
    /// checked open (LocalFile: a regular file, never a wait on a FIFO, at most `maxBytes`):
    /// at start and on SIGHUP.
    static func read(_ path: String) throws(Invalid) -> String {
        let bytes: [UInt8]
        do {
            bytes = try LocalFile.read(path, limit: maxBytes).bytes
        } catch .tooLarge {
            throw Invalid(description: "--config \(path) is larger than \(maxBytes) bytes, the most read from it")
        } catch {
            throw Invalid(description: "cannot read --config \(path): \(error.detail)")
        }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw Invalid(description: "cannot read --config \(path): not UTF-8 text")
        }
        return text
    }

    /// Whether the text is a JSON config (else the older rate-limit lines).
    static func isJSON(_ text: String) -> Bool {
        // A rate-limit line starts with a host or `#`, never with a bracket.
        let first = text.first(where: { !$0.isWhitespace })
        return first == "{" || first == "["
    }

    /// The options of a command line that names a --config file: the file's settings (a JSON
    /// config), then the flags over them. The older rate-limit file adds no settings here.
    static func load(path: String, arguments: [String]) throws(Invalid) -> DaemonOptions {
        let text = try read(path)
        if isJSON(text) { return try options(path: path, text: text, arguments: arguments) }
        do {
            guard case .run(let options) = try DaemonOptions.parse(arguments) else { throw Invalid(description: "unexpected") }
            return options
        } catch let error as Invalid {
            throw error
        } catch {
            throw Invalid(description: "\(error)")
        }
    }

    /// Options from the file, then the command line's flags over them.
    static func options(path: String, text: String, arguments: [String]) throws(Invalid) -> DaemonOptions {
        let root: JSONObject
        do {
            guard case .object(let object) = try JSONCodec.decode(text) else {
                throw Invalid(description: "--config \(path): expected a JSON object")
            }
            root = object
        } catch let error as Invalid {
            throw error
        } catch {
            throw Invalid(description: "--config \(path): not valid JSON")
        }
        var options = DaemonOptions()
        var sections = Sections()
        for (key, value) in root.members {
            do throws(Invalid) {
                if let option = DaemonOptions.table.first(where: { $0.key == key && !$0.key.isEmpty }) {
                    try apply(option, value, to: &options, key: key)
                } else {
                    try section(key, value, into: &sections, options: &options)
                }
            } catch {
                throw Invalid(description: "--config \(path): \(error.description)")
            }
        }
        options.configSections = sections
        options.configPath = path
        do {
            guard case .run(var merged) = try DaemonOptions.parse(arguments, base: options) else {
                throw Invalid(description: "--config \(path): unexpected")
            }
            merged.configPath = path
            return merged
        } catch let error as DaemonOptions.UsageError {
            throw Invalid(description: error.description)
        } catch {
            throw Invalid(description: "\(error)")
        }
    }

    /// A flag's value from JSON: a string, a number or a bool as the flag takes it; an array
    /// for a repeatable flag.
    private static func apply(_ option: DaemonOptions.Option, _ value: JSONValue, to options: inout DaemonOptions,
                              key: String) throws(Invalid) {
        var values: [(String, JSONValue)] = [(key, value)]
        if option.repeatable {
            guard case .array(let items) = value else { throw Invalid(description: "\(key): expected an array") }
            values = items.enumerated().map { ("\(key)[\($0.offset)]", $0.element) }
        }
        for (path, item) in values {
            let text: String
            switch (item, option.argument) {
            case (.bool(let on), nil):
                if !on { continue }
                text = ""
            case (_, nil):
                throw Invalid(description: "\(path): expected true or false")
            case (.string(let s), _): text = s
            case (.integer(let n), _): text = String(n)
            case (.double(let d), _): text = String(d)
            default:
                throw Invalid(description: "\(path): expected \(option.argument ?? "a value") as a string or number")
            }
            do {
                try option.apply(&options, text)
            } catch {
                throw Invalid(description: "\(path): \(error.description)")
            }
        }
    }

    private static func section(_ key: String, _ value: JSONValue, into sections: inout Sections,
                                options: inout DaemonOptions) throws(Invalid) {
        switch key {
        case "rateLimits":
            sections.rateLimits = try objects(value, key)
        case "auth":
            sections.auth = try objects(value, key)
        case "logging":
            guard case .object = value else { throw Invalid(description: "logging: expected an object of setLogging params") }
            sections.logging = value
        case "cookieJars":
            guard case .object(let jars) = value else { throw Invalid(description: "cookieJars: expected an object, jar name -> {\"file\": PATH}") }
            for (name, jar) in jars.members {
                guard case .object(let fields) = jar else { throw Invalid(description: "cookieJars.\(name): expected {\"file\": PATH}") }
                for (field, fieldValue) in fields.members {
                    guard field == "file" else { throw Invalid(description: "cookieJars.\(name).\(field): unknown key") }
                    guard case .string(let path) = fieldValue, path.hasPrefix("/") else {
                        throw Invalid(description: "cookieJars.\(name).file: expected an absolute path")
                    }
                    guard name == CookiePersister.jar else {
                        throw Invalid(description: "cookieJars.\(name): only the default jar can be kept in a file")
                    }
                    options.cookieFile = path
                }
            }
        case "cache":
            // --cache-dir and --cache-max-bytes (flags on the command line win).
            guard case .object(let fields) = value else { throw Invalid(description: "cache: expected an object") }
            for (field, fieldValue) in fields.members {
                switch field {
                case "dir":
                    guard case .string(let path) = fieldValue, path.hasPrefix("/") else {
                        throw Invalid(description: "cache.dir: expected an absolute path")
                    }
                    options.cacheDirectory = path
                case "maxBytes":
                    guard let n = fieldValue.integerValue, n >= 0 else { throw Invalid(description: "cache.maxBytes: expected a whole number >= 0") }
                    options.cacheMaxBytes = Int64(n)
                default:
                    throw Invalid(description: "cache.\(field): unknown key")
                }
            }
            sections.cache = value
        case "redis":
            // Never reached: `redis` is the --redis row of DaemonOptions.table, read above.
            sections.redis = value
        default:
            throw Invalid(description: "\(key): unknown key")
        }
    }

    private static func objects(_ value: JSONValue, _ key: String) throws(Invalid) -> [JSONValue] {
        guard case .array(let items) = value else { throw Invalid(description: "\(key): expected an array of objects") }
        for (index, item) in items.enumerated() {
            guard case .object = item else { throw Invalid(description: "\(key)[\(index)]: expected an object") }
        }
        return items
    }
}
