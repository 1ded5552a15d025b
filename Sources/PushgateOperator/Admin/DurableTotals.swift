import Logging
import PushgateStore

/// The totals since the store was created: what the store had at start plus what this process
/// has counted. What this process counts is written to the store every few seconds and at
/// shutdown (`persist`), so a crash loses at most the last interval's counts, never a push.
/// While the store cannot commit, each interval writes even with nothing counted: that write
/// is what finds the disk back when no request comes.
actor DurableTotals {
    /// What the store held at start.
    private var restored = Totals()
    /// What of this process's counts the store has.
    private var persisted = Totals()
    private let store: any NotificationStore
    private let logger: Logger

    init(store: any NotificationStore, logger: Logger) {
        self.store = store
        self.logger = logger
    }

    func restore(_ stored: [String: Int64]) {
        restored = Totals(stored: stored)
    }

    /// The durable totals, given this process's counts now.
    func durable(current: Totals) -> Totals {
        restored + current
    }

    /// Writes what was counted since the last write. A failed write is retried with the next.
    func persist(current: Totals) async {
        let delta = current - persisted
        var counts = delta.stored
        if counts.isEmpty, !store.health.canCommit {
            // Written anyway (adding 0 still writes the row): only a commit that succeeds tells
            // the store the disk has room again, and a gateway whose /readyz is 503 may be sent
            // no other write until it does.
            counts["received"] = 0
        }
        guard !counts.isEmpty else { return }
        // Claimed before the commit is awaited: another write meanwhile (the one at shutdown
        // while the periodic one is on its way, or a periodic one behind a commit slower than
        // its interval) writes only what came since, instead of the same counts again, which
        // the store would keep for good once the process ends. Given back if the commit fails.
        persisted = persisted + delta
        do {
            try await store.commit([.addTotals(counts)])
        } catch {
            persisted = persisted - delta
            // A storage fault is logged by the store as it begins and ends, not every 10 s.
            if error.kind != .unavailable {
                logger.warning(
                    "durable totals not written; retried with the next write",
                    metadata: ["error": "\(error)"]
                )
            }
        }
    }
}
