internal import CLinux
import FetchEngine
import FoundationEssentials
import Glibc
import JSONRPC

/// A `helper` rule: an external command that makes the credential, as git's credential
/// helpers and AWS's credential_process do. It runs without a shell, with a clean
/// environment (PATH=/usr/bin:/bin plus what the rule names), gets one JSON object on stdin
/// and prints one on stdout; it is killed at its timeout.
struct HelperRule: Sendable {
    let command: [String]
    let timeout: Double
    let environment: [(String, String)]

    static let defaultPath = "/usr/bin:/bin"
    /// The most of its stdout and stderr read.
    static let maxOutputBytes = 64 << 10

    init(reading reader: inout ParamReader) throws {
        guard let argv = try reader.array("command"), !argv.isEmpty else {
            throw RPCError.invalidParams(field: reader.field("command"), "required: the helper's argv, a non-empty array of strings")
        }
        var command: [String] = []
        for (index, value) in argv.enumerated() {
            guard case .string(let word) = value, !word.containsNUL else {
                throw RPCError.invalidParams(field: reader.field("command") + "[\(index)]", "expected a string without NUL")
            }
            command.append(word)
        }
        guard command[0].hasPrefix("/") else {
            throw RPCError.invalidParams(field: reader.field("command") + "[0]", "must be an absolute path: the helper runs without a shell or PATH search")
        }
        self.command = command
        timeout = try reader.number("timeout", in: 0.01...600) ?? 10
        var environment: [(String, String)] = []
        if let env = try reader.object("env") {
            for (name, value) in env.members {
                guard case .string(let text) = value, !name.isEmpty, !name.contains("="), !name.containsNUL, !text.containsNUL else {
                    throw RPCError.invalidParams(field: reader.field("env") + ".\(name)", "expected a variable name and a string value without NUL")
                }
                environment.append((name, text))
            }
        }
        if !environment.contains(where: { $0.0 == "PATH" }) { environment.insert(("PATH", Self.defaultPath), at: 0) }
        self.environment = environment
    }

    /// What the helper reads: `{"version": 1, "action": "get", "url", "method", "host", "challenge"}`.
    static func input(_ request: CredentialRequest) -> [UInt8] {
        JSONCodec.encodeLine([
            "version": 1, "action": "get", "url": .string(request.url), "method": .string(request.method),
            "host": .string(request.host), "challenge": JSONValue(request.challenge),
        ])
    }

    /// The credential in the helper's stdout, received at `now` (monotonic) / `wallNow` (unix s).
    static func credential(stdout: [UInt8], now: Double, wallNow: Double) -> Result<Credential, AuthProblem> {
        guard let object = (try? JSONCodec.decode(stdout))?.objectValue else {
            return .failure(AuthProblem("the helper's output is not one JSON object"))
        }
        guard case .object(let headers)? = object["headers"], !headers.members.isEmpty else {
            return .failure(AuthProblem("the helper's output has no \"headers\" object"))
        }
        var credential = Credential(headers: [], secrets: [], usableUntil: nil, expiresAt: nil, kept: false)
        var budget = HTTPSyntax.HeaderBudget()
        for (name, value) in headers.members {
            guard case .string(let text) = value,
                  let size = try? HTTPSyntax.checkHeader(name: name, value: text, field: "headers"),
                  (try? budget.add(size, field: "headers")) != nil else {
                return .failure(AuthProblem("the helper's output has a header that cannot be sent (\(name.prefix(60)))"))
            }
            credential.headers.append(HTTPHeader(name, text))
            credential.secrets.append(text)
            if let space = text.firstIndex(of: " ") { credential.secrets.append(String(text[text.index(after: space)...])) }
        }
        // Each, when given, is a number: anything else is not the output the contract asks for.
        for name in ["expiresIn", "expiresAt"] {
            if let value = object[name], !(value.numberValue?.isFinite ?? false) {
                return .failure(AuthProblem("the helper's output has an \"\(name)\" that is not a number of seconds"))
            }
        }
        let lifetime: Double? = if let seconds = object["expiresIn"]?.numberValue {
            seconds
        } else if let at = object["expiresAt"]?.numberValue {
            at - wallNow
        } else {
            nil
        }
        if let lifetime {
            credential.kept = true
            credential.expiresAt = now + lifetime
            credential.usableUntil = now + lifetime
        }
        return .success(credential)
    }

    /// How often the helper's exit is looked for while its pipes stay open (a background child
    /// of it may hold them for as long as it lives).
    static let exitCheckMilliseconds: Int32 = 20

    /// Runs the helper to its end or its timeout, on the calling (blocking) thread: its stdout,
    /// or why there is none (the first line of its stderr, never its stdout). Its exit is the
    /// end: what its pipes hold then is its output, even when a child it left in the
    /// background still holds them open.
    func run(input: [UInt8]) -> Result<[UInt8], AuthProblem> {
        var pipes: [[Int32]] = []
        for _ in 0..<3 {
            var fds: [Int32] = [-1, -1]
            guard fetchd_pipe_cloexec(&fds) == 0 else {
                pipes.flatMap { $0 }.forEach { close($0) }
                return .failure(AuthProblem("cannot start the helper: \(String(cString: strerror(errno)))"))
            }
            pipes.append(fds)
        }
        let (stdinRead, stdinWrite) = (pipes[0][0], pipes[0][1])
        let (stdoutRead, stdoutWrite) = (pipes[1][0], pipes[1][1])
        let (stderrRead, stderrWrite) = (pipes[2][0], pipes[2][1])
        let argv = command.map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.0)=\($0.1)") } + [nil]
        let pid = fetchd_spawn(command[0], argv, envp, stdinRead, stdoutWrite, stderrWrite)
        argv.forEach { free($0) }
        envp.forEach { free($0) }
        [stdinRead, stdoutWrite, stderrWrite].forEach { close($0) }
        guard pid > 0 else {
            [stdinWrite, stdoutRead, stderrRead].forEach { close($0) }
            return .failure(AuthProblem("cannot start the helper \(command[0]): \(String(cString: strerror(-pid)))"))
        }
        for fd in [stdinWrite, stdoutRead, stderrRead] { _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) }
        var toWrite = input[...]
        var stdout: [UInt8] = [], stderr: [UInt8] = []
        var live: [Int32: Bool] = [stdinWrite: true, stdoutRead: true, stderrRead: true]
        let deadline = ContinuousClock.now + .milliseconds(Int(timeout * 1000))
        var timedOut = false
        var status: Int32 = 0
        var exited = false
        var buffer = [UInt8](repeating: 0, count: 16 << 10)
        /// Takes what `fd` holds now; at its end (or an error) it is closed.
        func take(_ fd: Int32) {
            while true {
                let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if n < 0 && errno == EINTR { continue }
                if n < 0 && errno == EAGAIN { return }
                guard n > 0 else {
                    close(fd)
                    live[fd] = false
                    return
                }
                if fd == stdoutRead {
                    if stdout.count < Self.maxOutputBytes { stdout += buffer[0..<n] }
                } else if stderr.count < Self.maxOutputBytes {
                    stderr += buffer[0..<n]
                }
            }
        }
        while live[stdoutRead] == true || live[stderrRead] == true {
            if !exited, waitpid(pid, &status, WNOHANG) == pid {
                // Its exit is the end: the pipes hold all it wrote (a child it left in the
                // background may keep them open for as long as it lives).
                exited = true
                for fd in [stdoutRead, stderrRead] where live[fd] == true { take(fd) }
                break
            }
            let left = deadline - ContinuousClock.now
            guard left > .zero else {
                timedOut = true
                break
            }
            var polled = live.filter(\.value).keys.sorted().map { fd in
                pollfd(fd: fd, events: Int16(fd == stdinWrite ? POLLOUT : POLLIN), revents: 0)
            }
            let leftMs = left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000
            let ready = poll(&polled, nfds_t(polled.count), Int32(min(Int64(Self.exitCheckMilliseconds), max(1, leftMs))))
            if ready < 0 && errno == EINTR { continue }
            guard ready > 0 else { continue }
            for entry in polled where entry.revents != 0 {
                if entry.fd == stdinWrite {
                    let n = toWrite.withUnsafeBytes { write(stdinWrite, $0.baseAddress, $0.count) }
                    if n > 0 { toWrite = toWrite.dropFirst(n) }
                    if n < 0 && errno != EAGAIN || toWrite.isEmpty {
                        close(stdinWrite)
                        live[stdinWrite] = false
                    }
                    continue
                }
                take(entry.fd)
            }
        }
        for (fd, isOpen) in live where isOpen { close(fd) }
        if timedOut {
            kill(-pid, SIGKILL)
            kill(pid, SIGKILL)
        }
        if !exited {
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        }
        if timedOut {
            return .failure(AuthProblem("the helper ran past its timeout of \(Self.seconds(timeout)) s and was killed"))
        }
        let said = Self.firstLine(stderr)
        if status & 0x7f != 0 {
            return .failure(AuthProblem("the helper was killed by signal \(status & 0x7f)", helperSaid: said))
        }
        let code = (status >> 8) & 0xff
        guard code == 0 else { return .failure(AuthProblem("the helper exited with status \(code)", helperSaid: said)) }
        return .success(stdout)
    }

    /// The first line of the helper's stderr, its own words (at most 300 bytes), or nil.
    static func firstLine(_ stderr: [UInt8]) -> String? {
        let line = stderr.prefix { $0 != 0x0a && $0 != 0x0d }
        let text = CredentialFetcher.trimmed(String(decoding: line.prefix(300), as: UTF8.self))
        return text.isEmpty ? nil : text
    }

    static func seconds(_ value: Double) -> String {
        value == value.rounded() ? String(Int(value)) : String(value)
    }
}
