import FetchEngine

/// The request's cookie jar (named jars are shared by every client; `false`: none). The
/// engine's libcurl share handle then sends and stores the cookies, on every redirect hop.
final class CookieStage: Stage {
    func prepare(_ attempt: Attempt, _ job: Job) throws -> Preparation {
        attempt.request.cookieJar = job.spec.model.cookieJar
        return .proceed
    }
}
