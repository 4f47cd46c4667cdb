import FetchEngine
import FoundationEssentials
import Glibc
import Synchronization

/// Makes the credentials of rules that have something to fetch: reads a token or password
/// file (at each use, on the blocking threads), or asks an OAuth 2 token endpoint (the
/// engine directly: no job, no host limits, no HTTP log).
struct CredentialFetcher: Sendable {
    let engine: HTTPEngine
    let blocking: WorkerThreads
    let now: @Sendable () -> Double
    /// Engine transfer ids of token requests: a range of their own, apart from the jobs'.
    private let nextTransfer = TransferIDs()

    /// The longest secret file read.
    static let maxFileBytes = 64 << 10

    init(engine: HTTPEngine, blocking: WorkerThreads, now: @escaping @Sendable () -> Double) {
        self.engine = engine
        self.blocking = blocking
        self.now = now
    }

    func fetch(_ rule: AuthRule, for request: CredentialRequest, done: @escaping @Sendable (Result<Credential, AuthProblem>) -> Void) {
        blocking.execute { [self] in
            do throws(AuthProblem) {
                switch rule.kind {
                case .bearer(let token):
                    done(.success(Credential.bearer(try Self.secret(token, field: "tokenFile"), kept: false)))
                case .basic(let user, let password):
                    done(.success(Credential.basic(user: user, password: try Self.secret(password, field: "passwordFile"), kept: false)))
                case .oauth2(let grant):
                    requestToken(grant, clientSecret: try Self.secret(grant.clientSecret, field: "clientSecretFile"), done: done)
                case .awsSigV4(let aws):
                    guard case .file(let path, let profile) = aws.keys else {
                        throw AuthProblem("the keys are given inline: nothing to fetch")
                    }
                    let text = try Self.fileText(path, field: "credentialsFile")
                    guard let keys = AWSSigV4Rule.keys(inCredentialsFile: text, profile: profile) else {
                        throw AuthProblem("credentialsFile \(path) has no aws_access_key_id and aws_secret_access_key for profile \(profile)")
                    }
                    done(.success(Credential.aws(provider: aws.provider, keys, kept: false)))
                case .helper(let helper):
                    let stdout = try helper.run(input: HelperRule.input(request)).get()
                    done(HelperRule.credential(stdout: stdout, now: now(), wallNow: Date().timeIntervalSince1970))
                }
            } catch {
                done(.failure(error))
            }
        }
    }

    private func requestToken(_ grant: OAuth2Grant, clientSecret: String,
                              done: @escaping @Sendable (Result<Credential, AuthProblem>) -> Void) {
        let now = self.now
        do {
            try engine.start(OAuth2Token.request(grant, clientSecret: clientSecret), id: nextTransfer.next()) { outcome in
                switch outcome {
                case .success(let answer):
                    done(OAuth2Token.credential(status: answer.status, body: answer.body, grant: grant, now: now()))
                case .failure(let error):
                    done(.failure(AuthProblem("the token request failed (\(error.kind.rawValue)): \(error.detail)")))
                }
            }
        } catch {
            done(.failure(AuthProblem("the token request could not start: \(error.detail)")))
        }
    }

    /// A secret as it is now: inline, or the file's text without its surrounding blanks
    /// (a trailing newline). Only the file's path is ever named in an error.
    static func secret(_ secret: AuthRule.Secret, field: String) throws(AuthProblem) -> String {
        switch secret {
        case .inline(let text):
            return text
        case .file(let path):
            let text = trimmed(try fileText(path, field: field))
            guard !text.isEmpty else { throw AuthProblem("\(field) \(path) is empty") }
            guard text.utf8.allSatisfy({ $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7f) }) else {
                throw AuthProblem("\(field) \(path) holds more than one line or control characters")
            }
            return text
        }
    }

    /// A small file's UTF-8 text, read on the caller's (blocking) thread through the checked
    /// open (LocalFile: a regular file, never a wait on a FIFO, at most `maxFileBytes`).
    static func fileText(_ path: String, field: String) throws(AuthProblem) -> String {
        let bytes: [UInt8]
        do {
            bytes = try LocalFile.read(path, limit: maxFileBytes).bytes
        } catch .tooLarge {
            throw AuthProblem("\(field) \(path) is larger than \(maxFileBytes) bytes")
        } catch {
            throw AuthProblem("cannot read \(field) \(path): \(error.detail)")
        }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw AuthProblem("\(field) \(path) is not UTF-8 text")
        }
        return text
    }

    /// Without leading and trailing white space, line breaks included.
    static func trimmed(_ text: String) -> String {
        guard let first = text.firstIndex(where: { !$0.isWhitespace }) else { return "" }
        let last = text.lastIndex(where: { !$0.isWhitespace })!
        return String(text[first...last])
    }
}

/// Transfer ids for work outside jobs, from 2^62 up (jobs count from 1).
private final class TransferIDs: Sendable {
    private let counter = Atomic<UInt64>(1 << 62)

    func next() -> UInt64 {
        counter.add(1, ordering: .relaxed).newValue
    }
}
