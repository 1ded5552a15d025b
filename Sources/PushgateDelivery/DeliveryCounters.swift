import PushgateModel
import Synchronization

/// Running totals of the delivery core since the process started, by bounded label: what the
/// metrics and the admin API report. Each moves once per event, with a relaxed atomic add: they
/// are statistics, not synchronisation. What is held, stored or connected now is not counted
/// here but read from the shards (`DeliveryCore.statistics()`).
public final class DeliveryCounters: Sendable {
    /// Totals by the cases of one label.
    public final class Family<Label: Hashable & CaseIterable & Sendable>: Sendable {
        private final class Value: Sendable {
            let count = Atomic<Int>(0)
        }

        private let values: [Label: Value]

        init() {
            values = Dictionary(uniqueKeysWithValues: Label.allCases.map { ($0, Value()) })
        }

        public subscript(label: Label) -> Int { values[label]!.count.load(ordering: .relaxed) }

        public var total: Int { Label.allCases.reduce(0) { $0 + self[$1] } }

        func add(_ label: Label, _ count: Int = 1) {
            values[label]!.count.add(count, ordering: .relaxed)
        }
    }

    public let deliveries = Family<DeliveryKind>()
    public let drops = Family<DropReason>()
    public let dispositions = Family<Disposition>()
    public let budgetExhausted = Family<BudgetScope>()
    public let piggybacked = Family<WakeKind>()
    private let acknowledgedCount = Atomic<Int>(0)

    public init() {}

    public var acknowledged: Int { acknowledgedCount.load(ordering: .relaxed) }

    func acknowledged(_ count: Int) { acknowledgedCount.add(count, ordering: .relaxed) }

    func recordDelivery(_ kind: DeliveryKind) { deliveries.add(kind) }

    func recordDrop(_ reason: DropReason, count: Int) {
        guard count > 0 else { return }
        drops.add(reason, count)
    }

    func recordDisposition(_ disposition: Disposition) { dispositions.add(disposition) }
}
