import NIOConcurrencyHelpers
import NIOCore

/// Work handed to one event loop from other threads, run in batches. The store's writer
/// completes the commits of a whole group at once, often a hundred for one shard: one loop task
/// for all of them takes the loop's task-queue lock and wakes it at most once, where a task per
/// completion took the lock (and competed with the loop for it) a hundred times.
///
/// Bounded by what submits to it: each item is a committed store batch, and the store refuses
/// batches beyond its limit of waiting commands. Locked with NIO's pthread lock, not
/// `Synchronization.Mutex`, whose raw futex calls ThreadSanitizer cannot see (as in the store's
/// `Locked`).
final class LoopInbox: Sendable {
    private struct Pending {
        var items: [@Sendable () -> Void] = []
        /// A drain task is queued on the loop and has not yet taken the items.
        var scheduled = false
    }

    private let loop: any EventLoop
    private let pending = NIOLockedValueBox(Pending())

    init(loop: any EventLoop) {
        self.loop = loop
    }

    /// Runs `item` on the loop, after every item submitted before it.
    func submit(_ item: @escaping @Sendable () -> Void) {
        let schedule = pending.withLockedValue { state in
            state.items.append(item)
            if state.scheduled { return false }
            state.scheduled = true
            return true
        }
        if schedule {
            loop.execute { self.drain() }
        }
    }

    private func drain() {
        let items = pending.withLockedValue { state in
            state.scheduled = false
            return state.items.take()
        }
        for item in items { item() }
    }
}

extension Array {
    /// The elements, leaving the array empty.
    fileprivate mutating func take() -> Self {
        var taken: Self = []
        swap(&taken, &self)
        return taken
    }
}
