import PushgateModel
import Synchronization

/// Running totals of the delivery core, for operator metrics. Updated with relaxed atomics:
/// they are statistics, not synchronisation.
public final class DeliveryCounters: Sendable {
    private final class Counter: Sendable {
        let value = Atomic<Int>(0)
    }

    private let queuedCount = Atomic<Int>(0)
    private let heldCount = Atomic<Int>(0)
    private let connectedCount = Atomic<Int>(0)
    private let acknowledgedCount = Atomic<Int>(0)
    private let deliveriesByKind: [DeliveryKind: Counter]
    private let dropsByReason: [DropReason: Counter]
    private let dispositionsByName: [Disposition: Counter]

    public init() {
        deliveriesByKind = Dictionary(uniqueKeysWithValues: DeliveryKind.allCases.map { ($0, Counter()) })
        dropsByReason = Dictionary(uniqueKeysWithValues: DropReason.allCases.map { ($0, Counter()) })
        dispositionsByName = Dictionary(uniqueKeysWithValues: Disposition.allCases.map { ($0, Counter()) })
    }

    /// Notifications with a sequence number (stored or delivered) not yet acknowledged or dropped.
    public var queued: Int { queuedCount.load(ordering: .relaxed) }
    /// Notifications the scheduler holds.
    public var held: Int { heldCount.load(ordering: .relaxed) }
    public var connectedDevices: Int { connectedCount.load(ordering: .relaxed) }
    public var acknowledged: Int { acknowledgedCount.load(ordering: .relaxed) }

    public func deliveries(_ kind: DeliveryKind) -> Int {
        deliveriesByKind[kind]!.value.load(ordering: .relaxed)
    }

    public func dropped(_ reason: DropReason) -> Int {
        dropsByReason[reason]!.value.load(ordering: .relaxed)
    }

    public func dispositions(of disposition: Disposition) -> Int {
        dispositionsByName[disposition]!.value.load(ordering: .relaxed)
    }

    func add(queued delta: Int) { queuedCount.add(delta, ordering: .relaxed) }
    func add(held delta: Int) { heldCount.add(delta, ordering: .relaxed) }
    func connected(_ delta: Int) { connectedCount.add(delta, ordering: .relaxed) }
    func acknowledged(_ count: Int) { acknowledgedCount.add(count, ordering: .relaxed) }

    func recordDelivery(_ kind: DeliveryKind) {
        deliveriesByKind[kind]!.value.add(1, ordering: .relaxed)
    }

    func recordDrop(_ reason: DropReason, count: Int) {
        guard count > 0 else { return }
        dropsByReason[reason]!.value.add(count, ordering: .relaxed)
    }

    func recordDisposition(_ disposition: Disposition) {
        dispositionsByName[disposition]!.value.add(1, ordering: .relaxed)
    }
}
