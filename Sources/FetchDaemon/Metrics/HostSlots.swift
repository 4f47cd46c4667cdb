import FetchEngine
import Synchronization

/// Hosts the duration histogram has a series for: the first `capacity` hosts seen each get a
/// slot for good; the rest share slot `capacity` (`other`). A lookup is a hash and a probe of
/// a fixed table whose entries are published once and never change, so it takes no lock; only
/// a new host takes one (at most `capacity` times, and a host past it none at all).
final class HostSlots: @unchecked Sendable {
    // @unchecked: `entries` is allocated once; each entry is written once (under `adding`)
    // with release ordering and read with acquire ordering; entries are never freed.
    static let capacity = 100
    private static let tableSize = 256

    private final class Entry {
        let host: HostKey
        let slot: Int
        init(host: HostKey, slot: Int) {
            self.host = host
            self.slot = slot
        }
    }

    private let entries: UnsafeMutablePointer<Atomic<UnsafeRawPointer?>>
    private let full = Atomic<Bool>(false)
    private let adding = Locked<[HostKey]>([])

    init() {
        entries = .allocate(capacity: Self.tableSize)
        for index in 0..<Self.tableSize { (entries + index).initialize(to: Atomic(nil)) }
    }

    /// The host's slot, or `capacity` for `other`.
    func slot(for host: HostKey) -> Int {
        var index = host.hashValue & (Self.tableSize - 1)
        while let raw = entries[index].load(ordering: .acquiring) {
            let found = Unmanaged<Entry>.fromOpaque(raw)._withUnsafeGuaranteedRef { $0.host == host ? $0.slot : nil }
            if let found { return found }
            index = (index + 1) & (Self.tableSize - 1)
        }
        if full.load(ordering: .relaxed) { return Self.capacity }
        return add(host)
    }

    private func add(_ host: HostKey) -> Int {
        adding.withLock { hosts in
            if let known = hosts.firstIndex(of: host) { return known }
            guard hosts.count < Self.capacity else { return Self.capacity }
            let slot = hosts.count
            hosts.append(host)
            if hosts.count == Self.capacity { full.store(true, ordering: .relaxed) }
            var index = host.hashValue & (Self.tableSize - 1)
            while entries[index].load(ordering: .relaxed) != nil { index = (index + 1) & (Self.tableSize - 1) }
            let entry = UnsafeRawPointer(Unmanaged.passRetained(Entry(host: host, slot: slot)).toOpaque())
            entries[index].store(entry, ordering: .releasing)
            return slot
        }
    }

    /// The hosts with a slot, by slot.
    var all: [HostKey] { adding.withLock { $0 } }
    var count: Int { adding.withLock { $0.count } }
}
