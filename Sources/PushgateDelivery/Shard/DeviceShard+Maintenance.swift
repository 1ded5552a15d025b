import NIOCore
import PushgateModel
import PushgateScheduler
import PushgateStore

// Heartbeats, the expiry sweep, and removing undelivered entries from a queue.
extension DeviceShard {
    /// Heartbeats for silent streams, so proxies and agents see a live connection. Run every
    /// tick: a stream that would be silent for the whole interval by the next tick gets one now.
    /// Only the streams the wheel has due are looked at; a closed or replaced stream (a deleted
    /// device has none) drops out.
    func heartbeat() {
        let now = clock.nowMillis()
        let lead = configuration.heartbeatLeadMillis
        for entry in heartbeats.takeDue(nowMillis: now) {
            guard let stream = entry.device.stream, stream.generation == entry.generation else { continue }
            // A wall clock stepped back leaves writes in the future: count them as made now, so
            // that the step cannot silence the stream for its length.
            if stream.lastWriteMillis > now { stream.lastWriteMillis = now }
            let due = stream.lastWriteMillis + lead
            guard due <= now else {
                // Written to since it was scheduled: due later.
                heartbeats.schedule(entry, dueMillis: due)
                continue
            }
            // No sink yet (the response head is on its way): the next tick looks again.
            guard let sink = stream.sink else {
                heartbeats.schedule(entry, dueMillis: now + 1)
                continue
            }
            stream.lastWriteMillis = now
            sink.heartbeat()
            heartbeats.schedule(entry, dueMillis: now + lead)
        }
    }

    /// Drops expired notifications that were not yet delivered, and forgets unregistered
    /// tokens kept past their retention.
    func sweepExpired() {
        let now = clock.nowMillis()
        for device in withQueue.values {
            let expired = removeUndelivered(from: device) { $0.committed && $0.record.expiresAt <= now }
            if !expired.isEmpty { dropExpired(expired, from: device) }
        }
        forgetTombstones(now: now)
    }

    /// A provider gets 410 for an unregistered token for `unregisteredRetentionMillis`, then 400
    /// BadDeviceToken as for a token that never was: the rows do not pile up forever.
    private func forgetTombstones(now: Int64) {
        var due: [String] = []
        while let oldest = tombstones.first, oldest.at <= now - configuration.unregisteredRetentionMillis {
            tombstones.removeFirst()
            // Unregistered, and still so (a token is never registered again).
            guard registrations[oldest.token]?.unregisteredAt != nil else { continue }
            registrations[oldest.token] = nil
            due.append(oldest.token)
        }
        if !due.isEmpty { commit([.forgetRegistrations(tokens: due)]) { _ in } }
    }

    func dropExpired(_ records: [AcceptedPush], from device: DeviceState) {
        dropQueued(records, .expired)
        queueShrank(device)
        commit([.remove(acceptanceIDs: records.map(\.acceptanceID))]) { _ in }
    }

    /// Counts queued notifications that leave undelivered (the caller removes them from disk).
    func dropQueued(_ records: [AcceptedPush], _ reason: DropReason) {
        counters.recordDrop(reason, count: records.count)
        for record in records { dropped(record, reason) }
    }

    /// After entries left the device's queue. An empty queue leaves the set the sweep walks and
    /// gives back the storage a backlog grew: a `CircularBuffer` never shrinks, so a device that
    /// once had thousands stored would hold their slots (a reference each: 128 KiB after 10,000)
    /// for as long as the process runs. Small queues keep theirs, so a connected device is not reallocated per push.
    func queueShrank(_ device: DeviceState) {
        guard device.queue.isEmpty else { return }
        withQueue[device.id] = nil
        if device.queue.capacity > DeviceState.retainedQueueCapacity { device.queue = DeviceState.emptyQueue }
    }

    /// Slots the device's queue has room for; nil for an unknown device.
    func queueCapacity(deviceID: String) -> Int? { devices[deviceID]?.queue.capacity }

    /// Removes entries that match and were never sent (on any stream or in a keep-alive
    /// response); returns them. A sent one stays for its ack: the agent may be handling it.
    func removeUndelivered(from device: DeviceState, where matches: (QueuedNotification) -> Bool) -> [AcceptedPush] {
        func removable(_ entry: QueuedNotification) -> Bool { !entry.sent && matches(entry) }
        // Most calls (every push with a collapse id, every device at each sweep) match nothing:
        // the queue is copied only once one entry must go. The search walks the queue's own
        // indices, not a slice's: a CircularBuffer's slice is a ring of its own whose indices
        // order from where the slice starts, so one found in a slice and used on the queue
        // trapped whenever the unsent part began past the end of the ring's storage.
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
