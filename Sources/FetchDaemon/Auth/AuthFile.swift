import FoundationEssentials
import Glibc
import JSONRPC

/// `--auth-file PATH`: a JSON array of setAuth params, loaded at start. It holds secrets, so
/// a file that other users may read or write is refused, as ssh refuses a private key.
enum AuthFile {
    static func rules(path: String, policy: FilePolicy) throws(StartupError) -> [AuthRule] {
        var info = stat()
        guard stat(path, &info) == 0 else {
            throw StartupError("cannot read --auth-file \(path): \(String(cString: strerror(errno)))")
        }
        guard info.st_mode & S_IFMT == S_IFREG else { throw StartupError("--auth-file \(path) is not a regular file") }
        let mode = info.st_mode & 0o777
        guard mode & 0o077 == 0 else {
            throw StartupError("--auth-file \(path) can be read or written by other users (mode \(String(mode, radix: 8))): "
                + "it holds secrets; make it private with chmod 600 \(path)")
        }
        guard info.st_uid == getuid() else {
            throw StartupError("--auth-file \(path) belongs to another user (uid \(info.st_uid))")
        }
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
        var rules: [AuthRule] = []
        for (index, entry) in entries.enumerated() {
            do {
                let (host, rule) = try AuthRule.read(entry, path: "[\(index)]", policy: policy)
                guard let rule else { throw StartupError("--auth-file \(path): [\(index)] removes \(host); only rules belong here") }
                rules.append(rule)
            } catch let error as StartupError {
                throw error
            } catch let error as RPCError {
                // The error names the field (`[2].tokenFile`), never a value.
                let field = error.data?.objectValue?["field"]?.stringValue ?? "[\(index)]"
                let detail = error.data?.objectValue?["detail"]?.stringValue ?? error.message
                throw StartupError("--auth-file \(path): \(field): \(detail)")
            } catch let refused as NotAllowed {
                throw StartupError("--auth-file \(path): [\(index)]: \(refused.detail)")
            } catch {
                throw StartupError("--auth-file \(path): [\(index)]: \(error)")
            }
        }
        return rules
    }
}
