import PushgateModel
import Synchronization

/// Running totals of the delivery core since the process started, by bounded label: what the
/// metrics and the admin API report. Each moves once per event, with a relaxed atomic add: they
/// are statistics, not synchronisation. What is held, stored or connected now is not counted
/// here but read from the shards (`DeliveryCore.statistics()`).
public final class DeliveryCounters: Sendable {
    public let deliveries = CounterFamily<DeliveryKind>()
    public let drops = CounterFamily<DropReason>()
    public let dispositions = CounterFamily<Disposition>()
    public let budgetExhausted = CounterFamily<BudgetScope>()
    public let piggybacked = CounterFamily<WakeKind>()
    /// Fetch results by kind, `timeout` included (a window that ended with no report).
    public let fetchResults = CounterFamily<FetchResult>()
    private let fetchWindowOverflowCount = Atomic<Int>(0)
    private let acknowledgedCount = Atomic<Int>(0)
    private let redeliveredCount = Atomic<Int>(0)

    public init() {}

    public var acknowledged: Int { acknowledgedCount.load(ordering: .relaxed) }

    /// Writes of a notification already written on an earlier stream (or in a keep-alive's
    /// response) and not acknowledged there; `deliveries` counts each notification's first.
    public var redelivered: Int { redeliveredCount.load(ordering: .relaxed) }

    /// Silent pushes delivered to a device that already had `Scheduler.openWindowsPerDevice`
    /// fetch windows open: no window, so no result or timeout counts for them.
    public var fetchWindowOverflow: Int { fetchWindowOverflowCount.load(ordering: .relaxed) }

    func recordFetchWindowOverflow() { fetchWindowOverflowCount.add(1, ordering: .relaxed) }

    func recordRedelivery() { redeliveredCount.add(1, ordering: .relaxed) }

    func acknowledged(_ count: Int) { acknowledgedCount.add(count, ordering: .relaxed) }

    func recordDelivery(_ kind: DeliveryKind) { deliveries.add(kind) }

    func recordDrop(_ reason: DropReason, count: Int) {
        guard count > 0 else { return }
        drops.add(reason, count)
    }

    func recordDisposition(_ disposition: Disposition) { dispositions.add(disposition) }
}
