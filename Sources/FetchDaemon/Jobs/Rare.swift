/// A value that most jobs do not have, kept behind one reference: nil when absent, and when
/// present shared by every copy (it is never changed in place; a new value is a new box).
/// Used where a large, seldom-set value would make a struct or class that every request
/// carries larger than glibc's per-thread cache size (1,032 bytes), or make its copies copy
/// the value's fields one by one.
struct Rare<Value: Sendable>: Sendable {
    private final class Box: Sendable {
        let value: Value
        init(_ value: Value) { self.value = value }
    }

    private let box: Box?

    init(_ value: Value?) {
        box = value.map(Box.init)
    }

    var value: Value? { box?.value }
    var isPresent: Bool { box != nil }
}
