/// How an auth rule names the hosts it applies to: `name` (any port), `name:port`, or
/// `*.domain` (every subdomain of domain, not domain itself). Names are HostPattern's;
/// `*` alone is refused: one credential for every host would go to hosts nobody meant.
struct AuthHostPattern: Sendable, Hashable, CustomStringConvertible {
    enum Form: Sendable, Hashable {
        case name(String)
        case nameAndPort(String, Int)
        case subdomains(of: String)
    }

    let form: Form
    /// The pattern as given, lowercased: the rule's key and its `host` in answers.
    let description: String

    init?(_ text: String) {
        let lowered = text.lowercased()
        description = lowered
        if lowered.hasPrefix("*.") {
            let domain = String(lowered.dropFirst(2))
            guard !domain.isEmpty, !domain.contains(":"), !domain.hasPrefix("["), HostPattern.isValid(domain) else { return nil }
            form = .subdomains(of: domain)
            return
        }
        guard lowered != "*", HostPattern.isValid(lowered) else { return nil }
        if let colon = lowered.lastIndex(of: ":"), !lowered.hasSuffix("]"), let port = Int(lowered[lowered.index(after: colon)...]) {
            form = .nameAndPort(String(lowered[..<colon]), port)
        } else {
            form = .name(lowered)
        }
    }

    /// Whether a request to `name` (lowercased) on `port` falls under this pattern.
    func matches(name: String, port: Int) -> Bool {
        switch form {
        case .name(let own): own == name
        case .nameAndPort(let own, let ownPort): own == name && ownPort == port
        case .subdomains(let domain): name.hasSuffix("." + domain)
        }
    }

    /// Among patterns that match one host, the highest wins: `name:port`, then `name`, then
    /// the longest `*.domain`.
    var precedence: Int {
        switch form {
        case .nameAndPort: Int.max
        case .name: Int.max - 1
        case .subdomains(let domain): domain.utf8.count
        }
    }
}
