/// A value that most jobs do not have, kept behind one reference: nil when absent, and when
/// present shared by every copy (it is never changed in place; a new value is a new box).
/// Used where a large, seldom-set value would make a struct or class that every request
/// carries reach malloc's large chunks (1,024 bytes and more with the header: they bypass
/// the per-thread cache), or make its copies copy the value's fields one by one.
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
