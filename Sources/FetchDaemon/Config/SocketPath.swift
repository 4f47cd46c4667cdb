import FoundationEssentials
import Glibc

/// Where the socket lives: `--socket PATH`, else `$FETCHD_SOCKET`, else
/// `$XDG_RUNTIME_DIR/fetchd.sock`, else `/tmp/fetchd-<uid>.sock`.
public enum SocketPath {
    public static func resolve(flag: String?, environment: [String: String], uid: UInt32) -> String {
        if let flag, !flag.isEmpty { return flag }
        if let path = environment["FETCHD_SOCKET"], !path.isEmpty { return path }
        if let runtime = environment["XDG_RUNTIME_DIR"], !runtime.isEmpty { return runtime + "/fetchd.sock" }
        return "/tmp/fetchd-\(uid).sock"
    }
}
