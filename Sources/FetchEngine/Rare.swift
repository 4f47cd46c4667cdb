/// A value that most requests do not have, kept behind one reference: nil when absent, and
/// when present shared by every copy (it is never changed in place; a new value is a new
/// box). Used where a large, seldom-set value would make a struct or class that every
/// request carries reach malloc's large chunks (1,024 bytes and more with the header: they
/// bypass the per-thread cache), or make its copies retain the value's fields one by one:
/// a request's transport options, a request model's routing, a spec's durable record.
///
/// Inlinable: the daemon's uses are specialized for their types (a call into this module's
/// generic code measured 3.7k instructions more per request, callgrind).
public struct Rare<Value: Sendable>: Sendable {
    @usableFromInline
    final class Box: Sendable {
        @usableFromInline let value: Value
        @inlinable init(_ value: Value) { self.value = value }
    }

    @usableFromInline let box: Box?

    @inlinable
    public init(_ value: Value?) {
        box = value.map(Box.init)
    }

    @inlinable public var value: Value? { box?.value }
    @inlinable public var isPresent: Bool { box != nil }
}
