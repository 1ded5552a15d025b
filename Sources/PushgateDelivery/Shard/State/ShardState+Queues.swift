import NIOCore
import PushgateModel
import PushgateStore

// Devices' queues: what leaves them undelivered, the expiry sweep, and their storage.
extension ShardState {
    /// Drops expired notifications that were not yet delivered, and forgets unregistered
    /// tokens kept past their retention: a plan of deletions, nothing to restore (expired
    /// rows left on disk by a failed commit are dropped again at the next start).
    func sweepExpired() -> ShardPlan {
        let now = clock.nowMillis()
        var plan = ShardPlan()
        for device in withQueue.values {
            let expired = takeUndelivered(from: device) { $0.committed && $0.record.expiresAt <= now }
            guard !expired.isEmpty else { continue }
            dropQueued(expired, .expired, into: &plan)
            queueShrank(device)
        }
        let forgotten = forgetTombstones(now: now)
        if !forgotten.isEmpty { plan.commands.append(.forgetRegistrations(tokens: forgotten)) }
        return plan
    }

    /// A provider gets 410 for an unregistered token for `unregisteredRetentionMillis`, then 400
    /// BadDeviceToken as for a token that never was: the rows do not pile up forever.
    private func forgetTombstones(now: Int64) -> [String] {
        var due: [String] = []
        while let oldest = tombstones.first, oldest.at <= now - configuration.unregisteredRetentionMillis {
            tombstones.removeFirst()
            // Unregistered, and still so (a token is never registered again).
            guard registrations[oldest.token]?.unregisteredAt != nil else { continue }
            registrations[oldest.token] = nil
            due.append(oldest.token)
        }
        return due
    }

    /// After entries left the device's queue. An empty queue leaves the set the sweep walks and
    /// gives back the storage a backlog grew: a `CircularBuffer` never shrinks, so a device that
    /// once had thousands stored would hold their slots (a reference each) for as long as the
    /// process runs. Small queues keep theirs, so a connected device is not reallocated per push.
    func queueShrank(_ device: DeviceState) {
        guard device.queue.isEmpty else { return }
        withQueue[device.id] = nil
        if device.queue.capacity > DeviceState.retainedQueueCapacity { device.queue = DeviceState.emptyQueue }
    }

    /// Slots the device's queue has room for; nil for an unknown device.
    func queueCapacity(deviceID: String) -> Int? { devices[deviceID]?.queue.capacity }

    /// Takes out the entries that match and were never sent (on any stream or in a keep-alive
    /// response); returns them. A sent one stays for its ack: the agent may be handling it.
    func takeUndelivered(from device: DeviceState, where matches: (QueuedNotification) -> Bool) -> [AcceptedPush] {
        func removable(_ entry: QueuedNotification) -> Bool { !entry.sent && matches(entry) }
        // Most calls (every push with a collapse id, every device at each sweep) match nothing:
        // the queue is copied only once one entry must go. The search walks the queue's own
        // indices, not a slice's: a CircularBuffer's slice is a ring of its own whose indices
        // order from where the slice starts, so one found in a slice and used on the queue
        // would trap whenever the unsent part began past the end of the ring's storage.
        var first = device.queue.index(device.queue.startIndex, offsetBy: device.deliveredCount)
        while first != device.queue.endIndex, !removable(device.queue[first]) { device.queue.formIndex(after: &first) }
        guard first != device.queue.endIndex else { return [] }
        var kept = CircularBuffer<QueuedNotification>(initialCapacity: device.queue.count)
        kept.append(contentsOf: device.queue[..<first])
        var removed: [AcceptedPush] = []
        for entry in device.queue[first...] {
            if removable(entry) {
                removed.append(entry.record)
                leftMemory(entry.record)
            } else {
                kept.append(entry)
            }
        }
        device.queue = kept
        return removed
    }
}
