internal import CLinux
import Glibc

/// Starts a detached, named OS thread that runs `body` (Foundation's `Thread` without
/// Foundation: the daemon links only FoundationEssentials, which keeps its memory small).
public enum NamedThread {
    public static func start(_ name: String, _ body: @escaping @Sendable () -> Void) {
        let box = Unmanaged.passRetained(Body(name: name, run: body)).toOpaque()
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
        var thread = pthread_t()
        let status = pthread_create(&thread, &attributes, { raw in
            let body = Unmanaged<Body>.fromOpaque(raw!).takeRetainedValue()
            // Linux keeps thread names to 15 bytes.
            _ = fetchd_name_this_thread(String(decoding: body.name.utf8.prefix(15), as: UTF8.self))
            body.run()
            return nil
        }, box)
        pthread_attr_destroy(&attributes)
        precondition(status == 0, "pthread_create failed: \(status)")
    }

    private final class Body: Sendable {
        let name: String
        let run: @Sendable () -> Void
        init(name: String, run: @escaping @Sendable () -> Void) {
            self.name = name
            self.run = run
        }
    }
}
