import Synchronization

/// The memory all shards may spend on notifications waiting for their devices (queued,
/// unacknowledged or held): the per-device and per-app limits bound one device, this bounds the
/// sum, so that pushes to many devices that stay offline cannot run the process out of memory.
/// A push that does not fit is refused `429 TooManyRequests` and kept nowhere.
///
/// A notification costs its payload and `overheadBytes` (its record, ids, token and topic, its
/// queue slot, the scheduler's entry). Shards add and subtract as records enter and leave their
/// memory, with one relaxed atomic each: the push path takes no lock.
public final class QueuedNotificationBudget: Sendable {
    /// About what a notification costs beside its payload.
    public static let overheadBytes = 256

    public let limit: Int
    private let used = Atomic<Int>(0)

    public init(limit: Int) {
        self.limit = limit
    }

    /// Bytes held now.
    public var bytes: Int { used.load(ordering: .relaxed) }

    public static func cost(payloadBytes: Int) -> Int { payloadBytes + overheadBytes }

    /// Whether a new push of this cost fits. It is added when its record enters a queue or the
    /// held set; two shards racing for the last room may both fit, by one push each at most.
    func fits(_ bytes: Int) -> Bool {
        used.load(ordering: .relaxed) + bytes <= limit
    }

    /// Counted whether or not it fits: what is loaded from the store, or held again after a
    /// failed commit, is on disk and must not be lost.
    func add(_ bytes: Int) {
        used.add(bytes, ordering: .relaxed)
    }

    func release(_ bytes: Int) {
        used.subtract(bytes, ordering: .relaxed)
    }
}
