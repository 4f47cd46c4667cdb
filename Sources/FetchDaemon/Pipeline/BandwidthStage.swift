import FetchEngine

/// The bandwidth budgets set with `setRateLimit`'s `maxRecvBytesPerSecond`: each attempt's
/// transfer draws from its host's budget (the host's own entry) and the whole daemon's (the
/// `*` entry), shared with every other transfer that draws from them, besides its own cap
/// (`TransferThrottle` holds all of them over every second). After the host's limits, so an
/// attempt that waited gets the budgets in force when it starts. No budget set: one atomic
/// load per attempt.
final class BandwidthStage: Stage {
    let admission: HostAdmission

    init(admission: HostAdmission) {
        self.admission = admission
    }

    func prepare(_ attempt: Attempt, _ job: Job) throws -> Preparation {
        let budgets = admission.receiveBudgets(for: job.host(of: attempt))
        if !budgets.isEmpty { attempt.request.receiveBudgets = budgets }
        return .proceed
    }
}
