import PushgateDelivery
import PushgateModel

/// Counts of events since some point: the process's start (`init(delivery:provider:)`), or the
/// store's creation (the durable totals). The admin API's `Totals`.
public struct Totals: Sendable, Equatable, Encodable {
    /// Pushes accepted (answered 200), whatever their disposition.
    public var received: Int64 = 0
    /// Notifications written to a device, every delivery kind.
    public var delivered: Int64 = 0
    /// Kept notifications dropped undelivered, every reason.
    public var dropped: Int64 = 0
    /// Provider requests refused.
    public var rejected: Int64 = 0
    /// Pushes accepted with disposition `discarded` (not kept).
    public var discarded: Int64 = 0
    /// Notifications acknowledged by their devices.
    public var acknowledged: Int64 = 0

    public init() {}

    /// What this process has counted so far.
    public init(delivery: DeliveryCounters, provider: ProviderCounters) {
        received = Int64(provider.received.total)
        delivered = Int64(delivery.deliveries.total)
        dropped = Int64(delivery.drops.total)
        rejected = Int64(provider.rejected.total)
        discarded = Int64(delivery.dispositions[.discarded])
        acknowledged = Int64(delivery.acknowledged)
    }

    private static var fields: [(name: String, value: WritableKeyPath<Totals, Int64>)] {
        [
            ("received", \.received), ("delivered", \.delivered), ("dropped", \.dropped),
            ("rejected", \.rejected), ("discarded", \.discarded), ("acknowledged", \.acknowledged),
        ]
    }

    /// As the store keeps them (`StoreCommand.addTotals`): by name; names this version does not
    /// know are ignored, missing ones are 0.
    public init(stored: [String: Int64]) {
        for field in Self.fields { self[keyPath: field.value] = stored[field.name] ?? 0 }
    }

    /// By name, for the store; only the nonzero ones.
    var stored: [String: Int64] {
        var counts: [String: Int64] = [:]
        for field in Self.fields where self[keyPath: field.value] != 0 {
            counts[field.name] = self[keyPath: field.value]
        }
        return counts
    }

    static func + (a: Totals, b: Totals) -> Totals {
        var sum = a
        for field in fields { sum[keyPath: field.value] += b[keyPath: field.value] }
        return sum
    }

    static func - (a: Totals, b: Totals) -> Totals {
        var difference = a
        for field in fields { difference[keyPath: field.value] -= b[keyPath: field.value] }
        return difference
    }
}
