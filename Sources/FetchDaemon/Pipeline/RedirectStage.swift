import FetchEngine

/// The redirects the daemon follows itself (`RedirectFollowing`): an attempt that carries
/// secrets (a credential an auth rule added, which the credential stage keeps from libcurl's
/// redirects) has each of its 3xx answers judged here as `.follow`, and the job's next step
/// goes to the hop, as the same attempt. First of the stages, so every stage prepares the
/// hop's request: the rule of the hop's origin (or none), the cache under the hop's URL, the
/// hop host's limits, the jar, the HTTP log. The final answer counts every hop in (`review`);
/// a retry starts over from the job's own URL, as libcurl's would.
final class RedirectStage: Stage {
    typealias State = RedirectFollowing

    func prepare(_ attempt: Attempt, _ job: Job) throws -> Preparation {
        // Most jobs never follow a redirect here: nothing to read.
        guard job.hasState(of: self) else { return .proceed }
        let follows = job.state(of: self)
        guard follows.limit != nil else { return .proceed }
        // Once the daemon follows a job's redirects, it follows all of them (a hop back to
        // the rule's origin gets the rule again).
        attempt.request.maxRedirects = 0
        follows.apply(to: &attempt.request)
        // The hop is logged with the secrets of the hops before it (its answer's exchange
        // shows them all).
        attempt.secrets = follows.earlierSecrets
        return .proceed
    }

    func judge(_ attempt: Attempt, _ outcome: AttemptOutcome, _ job: Job) -> Verdict {
        // The status first, without hashing: most answers are no redirect.
        guard let status = outcome.successStatus, (301...303).contains(status) || status == 307 || status == 308,
              case .success(let answer) = outcome else { return .pass }
        let follows = job.state(of: self)
        // Taken over at the first redirect of an attempt whose secrets libcurl must not carry.
        guard follows.limit != nil || !attempt.secrets.isEmpty else { return .pass }
        let earlier = follows.earlierSecrets.count
        let next = job.withState(of: self) { follows in
            follows.takeOver(limit: job.spec.request.maxRedirects)
            return follows.redirect(answer, of: attempt.request, secrets: Array(attempt.secrets.dropFirst(earlier)))
        }
        switch next {
        case .stay: return .pass
        case .follow: return .follow
        case .fail(let error): return .fail(JobFailed(jobID: job.id, attempts: job.attempts, error: error))
        }
    }

    func review(_ attempt: Attempt, _ decision: inout JobMachine.Decision, _ outcome: inout AttemptOutcome, _ job: Job) {
        guard job.hasState(of: self) else { return }
        switch decision {
        // A retry starts over from the job's own URL, as libcurl's would.
        case .again:
            job.withState(of: self) { $0 = RedirectFollowing() }
        case .final:
            let follows = job.state(of: self)
            if follows.followed > 0 { outcome = outcome.map { follows.completed($0) } }
        case .next, .follow:
            break
        }
    }
}

extension RedirectFollowing: DefaultJobState {}
