import FetchEngine
import Dispatch
import FoundationEssentials
import Glibc
import Synchronization

/// Keeps `--cookie-file` in step with the "default" jar: loads it at start, writes it
/// shortly after a change (changes within `debounce` make one write) and at shutdown.
/// All file work runs on its own serial queue, never on the engine thread.
final class CookiePersister: Sendable {
    /// Changes are written this long after the first of them: a burst of responses that
    /// set cookies costs one write, and a crash loses at most this much.
    static let debounce: DispatchTimeInterval = .seconds(1)
    /// Longest wait for the engine to hand over the jar (it answers between transfer steps).
    static let engineTimeout: DispatchTimeInterval = .seconds(10)
    static let jar = "default"

    private struct State {
        var scheduled = false
        var stopped = false
        /// The file could not be read: never overwrite what we could not load.
        var disabled = false
        var lastWritten: String?
    }

    let path: String
    private let engine: HTTPEngine
    private let log: Logger
    private let queue = DispatchQueue(label: "fetchd.cookie-file")
    private let state = Locked(State())

    init(path: String, engine: HTTPEngine, log: Logger) {
        self.path = path
        self.engine = engine
        self.log = log
    }

    /// Loads the file into the jar (blocking; called once at start), then follows changes.
    func start() {
        load()
        engine.observeCookieChanges { [weak self] jar in
            guard jar == Self.jar else { return }
            self?.changed()
        }
    }

    /// Writes what is in the jar now and stops following changes (at shutdown, before the
    /// engine stops).
    func stop() {
        queue.sync {
            flush()
            state.withLock { $0.stopped = true }
        }
    }

    private func load() {
        let text: String?
        do {
            text = try CookieFile.read(path)
        } catch {
            log.error("cookie file: \(error.description); it will not be written")
            state.withLock { $0.disabled = true }
            return
        }
        guard let text else {
            log.info("cookie file \(path) does not exist yet; it is written at the first change")
            return
        }
        let contents = CookieFile.parse(text)
        for problem in contents.problems {
            log.warning("cookie file \(path), \(problem): skipped")
        }
        let stored = wait { done in self.engine.store(contents.cookies, inJar: Self.jar, completion: done) } ?? 0
        log.info("cookie file \(path): loaded \(stored) cookies")
    }

    private func changed() {
        let schedule = state.withLock { state -> Bool in
            guard !state.scheduled, !state.stopped else { return false }
            state.scheduled = true
            return true
        }
        guard schedule else { return }
        queue.asyncAfter(deadline: .now() + Self.debounce) { [self] in
            // Cleared before reading the jar, so a change from now on schedules another write.
            state.withLock { $0.scheduled = false }
            flush()
        }
    }

    /// On `queue`: reads the jar from the engine and writes the file when it changed.
    private func flush() {
        let skip = state.withLock { $0.stopped || $0.disabled }
        guard !skip else { return }
        guard let cookies = wait({ done in self.engine.cookies(inJar: Self.jar, completion: done) }) else {
            log.error("cookie file: the engine did not hand over the jar; not written")
            return
        }
        let text = CookieFile.render(cookies, now: Int64(Date().timeIntervalSince1970))
        guard text != state.withLock({ $0.lastWritten }) else { return }
        do {
            try CookieFile.write(text, to: path)
            state.withLock { $0.lastWritten = text }
            log.debug("cookie file \(path) written")
        } catch {
            log.error("cookie file: \(error.description)")
        }
    }

    /// Waits for an engine completion (the engine thread never waits on this queue).
    private func wait<T: Sendable>(_ start: (@escaping @Sendable (T) -> Void) -> Void) -> T? {
        let done = DispatchSemaphore(value: 0)
        let box = Locked<T?>(nil)
        start { value in
            box.withLock { $0 = value }
            done.signal()
        }
        guard done.wait(timeout: .now() + Self.engineTimeout) == .success else { return nil }
        return box.withLock { $0 }
    }
}
