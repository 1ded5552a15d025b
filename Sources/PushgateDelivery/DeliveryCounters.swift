import Synchronization

/// Running totals of the delivery core, for operator metrics. Updated with relaxed atomics:
/// they are statistics, not synchronisation.
public final class DeliveryCounters: Sendable {
    /// Why a notification was dropped undelivered (the scheduler adds its own reasons).
    public enum DropReason: String, Sendable, CaseIterable {
        case expired
        case unregistered
    }

    private let queuedCount = Atomic<Int>(0)
    private let connectedCount = Atomic<Int>(0)
    private let deliveredImmediate = Atomic<Int>(0)
    private let deliveredStored = Atomic<Int>(0)
    private let acknowledgedCount = Atomic<Int>(0)
    private let droppedExpired = Atomic<Int>(0)
    private let droppedUnregistered = Atomic<Int>(0)
    private let dispositionDelivered = Atomic<Int>(0)
    private let dispositionStored = Atomic<Int>(0)
    private let dispositionDiscarded = Atomic<Int>(0)

    public init() {}

    /// Notifications accepted and not yet acknowledged or dropped.
    public var queued: Int { queuedCount.load(ordering: .relaxed) }
    public var connectedDevices: Int { connectedCount.load(ordering: .relaxed) }
    public var acknowledged: Int { acknowledgedCount.load(ordering: .relaxed) }

    public func deliveries(_ kind: DeliveryKind) -> Int {
        switch kind {
        case .immediate: return deliveredImmediate.load(ordering: .relaxed)
        case .stored: return deliveredStored.load(ordering: .relaxed)
        }
    }

    public func dropped(_ reason: DropReason) -> Int {
        switch reason {
        case .expired: return droppedExpired.load(ordering: .relaxed)
        case .unregistered: return droppedUnregistered.load(ordering: .relaxed)
        }
    }

    public func dispositions(of disposition: Disposition) -> Int {
        switch disposition {
        case .delivered: return dispositionDelivered.load(ordering: .relaxed)
        case .stored: return dispositionStored.load(ordering: .relaxed)
        case .discarded: return dispositionDiscarded.load(ordering: .relaxed)
        }
    }

    func add(queued delta: Int) { queuedCount.add(delta, ordering: .relaxed) }
    func connected(_ delta: Int) { connectedCount.add(delta, ordering: .relaxed) }
    func acknowledged(_ count: Int) { acknowledgedCount.add(count, ordering: .relaxed) }

    func recordDelivery(_ kind: DeliveryKind) {
        switch kind {
        case .immediate: deliveredImmediate.add(1, ordering: .relaxed)
        case .stored: deliveredStored.add(1, ordering: .relaxed)
        }
    }

    func recordDrop(_ reason: DropReason, count: Int) {
        guard count > 0 else { return }
        switch reason {
        case .expired: droppedExpired.add(count, ordering: .relaxed)
        case .unregistered: droppedUnregistered.add(count, ordering: .relaxed)
        }
    }

    func recordDisposition(_ disposition: Disposition) {
        switch disposition {
        case .delivered: dispositionDelivered.add(1, ordering: .relaxed)
        case .stored: dispositionStored.add(1, ordering: .relaxed)
        case .discarded: dispositionDiscarded.add(1, ordering: .relaxed)
        }
    }
}
