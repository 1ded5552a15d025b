import NIOConcurrencyHelpers
import Prometheus

/// Prometheus counters that follow totals counted elsewhere (delivery's and the provider API's
/// atomics, the process's CPU time): each scrape moves a counter by what its total moved since
/// the last scrape. Each event is counted once, where it happens; nothing on the path of a push
/// touches Prometheus, and the exposition shows exactly the totals.
final class FollowingCounters: Sendable {
    private struct Entry {
        let counter: Counter
        let read: @Sendable () -> Double
        var exported: Double
    }

    private let entries = NIOLockedValueBox<[Entry]>([])

    func follow(_ counter: Counter, _ read: @escaping @Sendable () -> Double) {
        entries.withLockedValue { $0.append(Entry(counter: counter, read: read, exported: 0)) }
    }

    /// Brings every counter up to its total (totals never go down).
    func sync() {
        entries.withLockedValue { entries in
            for index in entries.indices {
                let total = entries[index].read()
                let delta = total - entries[index].exported
                guard delta > 0 else { continue }
                if delta == delta.rounded() {
                    entries[index].counter.increment(by: Int64(delta))
                } else {
                    entries[index].counter.increment(by: delta)
                }
                entries[index].exported = total
            }
        }
    }
}
