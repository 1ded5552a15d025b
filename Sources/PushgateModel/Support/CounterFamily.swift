import Synchronization

/// Totals by the cases of one bounded label, each moved by a relaxed atomic add: statistics, not
/// synchronisation. What the metrics and the admin API read; one per counted event kind.
public final class CounterFamily<Label: Hashable & CaseIterable & Sendable>: Sendable {
    private final class Value: Sendable {
        let count = Atomic<Int>(0)
    }

    private let values: [Label: Value]

    public init() {
        values = Dictionary(uniqueKeysWithValues: Label.allCases.map { ($0, Value()) })
    }

    public subscript(label: Label) -> Int { values[label]!.count.load(ordering: .relaxed) }

    public var total: Int { Label.allCases.reduce(0) { $0 + self[$1] } }

    public func add(_ label: Label, _ count: Int = 1) {
        values[label]!.count.add(count, ordering: .relaxed)
    }
}
