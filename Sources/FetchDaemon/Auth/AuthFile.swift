import FetchEngine
import FoundationEssentials
import Glibc
import JSONRPC

/// `--auth-file PATH`: a JSON array of setAuth params, loaded at start. It holds secrets, so
/// a file that other users may read or write is refused, as ssh refuses a private key.
enum AuthFile {
    static func rules(path: String, policy: FilePolicy) throws(StartupError) -> [AuthRule] {
        let text = try readPrivate(path, flag: "--auth-file")
        let entries: [JSONValue]
        do {
            guard case .array(let array) = try JSONCodec.decode(text) else {
                throw StartupError("--auth-file \(path): expected a JSON array of setAuth params")
            }
            entries = array
        } catch let error as StartupError {
            throw error
        } catch {
            throw StartupError("--auth-file \(path): not valid JSON")
        }
        return try rules(entries, source: "--auth-file \(path)", prefix: "", policy: policy)
    }

    /// The most read from a file of auth rules.
    static let maxBytes = 1 << 20

    /// A file of secrets, read through the checked open (LocalFile: a regular file, never a
    /// wait on a FIFO, at most `maxBytes`): it must be ours, and nobody else may read or write
    /// it. What is checked is the file read, not what the name meant a moment before.
    static func readPrivate(_ path: String, flag: String) throws(StartupError) -> String {
        let file: LocalFile.Contents
        do {
            file = try LocalFile.read(path, limit: maxBytes)
        } catch .tooLarge {
            throw StartupError("\(flag) \(path) is larger than \(maxBytes) bytes, the most read from it")
        } catch {
            throw StartupError("cannot read \(flag) \(path): \(error.detail)")
        }
        try checkPrivate(permissions: file.permissions, owner: file.owner, path: path, flag: flag)
        guard let text = String(validating: file.bytes, as: UTF8.self) else {
            throw StartupError("cannot read \(flag) \(path): not UTF-8 text")
        }
        return text
    }

    /// A file of secrets named again after it was read (a config with auth rules): a regular
    /// file of ours that nobody else may read or write. stat() only: it never waits on a FIFO.
    static func checkPrivate(_ path: String, flag: String) throws(StartupError) {
        var info = stat()
        guard stat(path, &info) == 0 else {
            throw StartupError("cannot read \(flag) \(path): \(String(cString: strerror(errno)))")
        }
        guard info.st_mode & S_IFMT == S_IFREG else { throw StartupError("\(flag) \(path) is not a regular file") }
        try checkPrivate(permissions: UInt32(info.st_mode & 0o7777), owner: UInt32(info.st_uid), path: path, flag: flag)
    }

    /// Ours, and nobody else may read or write it, as ssh asks of a private key.
    private static func checkPrivate(permissions: UInt32, owner: UInt32, path: String, flag: String) throws(StartupError) {
        let mode = permissions & 0o777
        guard mode & 0o077 == 0 else {
            throw StartupError("\(flag) \(path) can be read or written by other users (mode \(String(mode, radix: 8))): "
                + "it holds secrets; make it private with chmod 600 \(path)")
        }
        guard owner == getuid() else {
            throw StartupError("\(flag) \(path) belongs to another user (uid \(owner))")
        }
    }

    /// setAuth params as rules; errors name `source` and the entry's path (`prefix[2].tokenFile`).
    static func rules(_ entries: [JSONValue], source: String, prefix: String, policy: FilePolicy) throws(StartupError) -> [AuthRule] {
        let path = source
        var rules: [AuthRule] = []
        for (index, entry) in entries.enumerated() {
            do {
                let (host, rule) = try AuthRule.read(entry, path: "\(prefix)[\(index)]", policy: policy)
                guard let rule else { throw StartupError("\(path): \(prefix)[\(index)] removes \(host); only rules belong here") }
                rules.append(rule)
            } catch let error as StartupError {
                throw error
            } catch let error as RPCError {
                // The error names the field (`[2].tokenFile`), never a value.
                let field = error.data?.objectValue?["field"]?.stringValue ?? "\(prefix)[\(index)]"
                let detail = error.data?.objectValue?["detail"]?.stringValue ?? error.message
                throw StartupError("\(path): \(field): \(detail)")
            } catch let refused as NotAllowed {
                throw StartupError("\(path): \(prefix)[\(index)]: \(refused.detail)")
            } catch {
                throw StartupError("\(path): \(prefix)[\(index)]: \(error)")
            }
        }
        return rules
    }
}
