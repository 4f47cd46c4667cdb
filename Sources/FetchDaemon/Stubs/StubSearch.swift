import FetchEngine

/// Looking for the stub of a set that answers a request, on a copy of the set's stubs (taken
/// under the store's lock, searched outside it), in slices of a step budget: a URL pattern is
/// matched a slice at a time too (`URLPattern.Run`), so no search holds a thread, or the
/// store, for longer than its slice. First the stubs are tried in order; a stub that matches
/// is a candidate, which the store takes if it is still there and not used up (else the
/// search goes on). With none, the nearest stub is found for the miss.
struct StubSearch: Sendable {
    let set: String
    let request: StubRequest
    /// The set's stubs when the search began, in the order they are tried.
    let stubs: [Stub]

    private enum Phase {
        case finding, nearest
    }

    private var phase = Phase.finding
    private var index = 0
    /// The pattern of `stubs[index]` being matched, while it takes more than one slice.
    private var run: URLPattern.Run?
    /// Whether each stub's URL pattern matched, once known (the nearest stub needs them again).
    private var patternHolds: [Int: Bool] = [:]
    private var nearest: (stub: Stub, differences: [String])?

    init(set: String, request: StubRequest, stubs: [Stub]) {
        self.set = set
        self.request = request
        self.stubs = stubs
    }

    enum Step {
        /// This stub matches (the one at `index` in `stubs`).
        case candidate(Stub, index: Int)
        /// No stub matches; the nearest, if the set has any.
        case missed(nearest: (stubID: String, differences: [String])?)
    }

    /// Goes on for about `budget` steps (a stub without a pattern counts one; a pattern, one
    /// per state per byte). Nil: the budget ran out first.
    mutating func advance(budget: inout Int) -> Step? {
        while budget > 0 {
            switch phase {
            case .finding:
                guard index < stubs.count else {
                    phase = .nearest
                    index = 0
                    continue
                }
                let stub = stubs[index]
                budget -= 1
                guard !stub.exhausted, stub.match.differences(request, all: false, url: .skip).isEmpty else {
                    index += 1
                    continue
                }
                guard let holds = urlHolds(stub, budget: &budget) else { return nil }
                index += 1
                if holds { return .candidate(stub, index: index - 1) }
            case .nearest:
                guard index < stubs.count else {
                    return .missed(nearest: nearest.map { (stubID: $0.stub.id, differences: $0.differences) })
                }
                let stub = stubs[index]
                budget -= 1
                guard let holds = urlHolds(stub, budget: &budget) else { return nil }
                nearest = Stub.closer(nearest, stub, stub.match.differences(request, url: .known(holds)))
                index += 1
            }
        }
        return nil
    }

    /// Whether `stubs[index]`'s URL rule holds; nil while its pattern needs more budget.
    private mutating func urlHolds(_ stub: Stub, budget: inout Int) -> Bool? {
        guard let pattern = stub.match.urlPattern else { return stub.match.urlHolds(request) }
        if let known = patternHolds[index] { return known }
        var matching = run ?? URLPattern.Run(pattern, request.url)
        guard let holds = matching.resume(budget: &budget) else {
            run = matching
            return nil
        }
        run = nil
        patternHolds[index] = holds
        return holds
    }
}

/// A search that goes on over several turns of the matching thread; a turn is queued only
/// when the one before it has ended, so one thread at a time touches it.
final class AsideSearch: @unchecked Sendable {
    var value: StubSearch

    init(_ search: StubSearch) {
        value = search
    }
}
