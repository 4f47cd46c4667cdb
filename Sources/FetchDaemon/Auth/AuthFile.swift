import FoundationEssentials
import Glibc
import JSONRPC

/// `--auth-file PATH`: a JSON array of setAuth params, loaded at start. It holds secrets, so
/// a file that other users may read or write is refused, as ssh refuses a private key.
enum AuthFile {
    static func rules(path: String, policy: FilePolicy) throws(StartupError) -> [AuthRule] {
        try checkPrivate(path, flag: "--auth-file")
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw StartupError("cannot read --auth-file \(path): not UTF-8 text")
        }
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

    /// A file of secrets must be a regular file of ours that nobody else may read or write.
    static func checkPrivate(_ path: String, flag: String) throws(StartupError) {
        var info = stat()
        guard stat(path, &info) == 0 else {
            throw StartupError("cannot read \(flag) \(path): \(String(cString: strerror(errno)))")
        }
        guard info.st_mode & S_IFMT == S_IFREG else { throw StartupError("\(flag) \(path) is not a regular file") }
        let mode = info.st_mode & 0o777
        guard mode & 0o077 == 0 else {
            throw StartupError("\(flag) \(path) can be read or written by other users (mode \(String(mode, radix: 8))): "
                + "it holds secrets; make it private with chmod 600 \(path)")
        }
        guard info.st_uid == getuid() else {
            throw StartupError("\(flag) \(path) belongs to another user (uid \(info.st_uid))")
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
