import NIOCore
import PushgateModel
import PushgateScheduler
import PushgateStore

// The scheduler's decisions turned into queue entries, store commands and timers.
extension DeviceShard {
    /// A queue entry waiting for its commit.
    struct QueuedEntry {
        var deviceID: String
        var seq: UInt64
        /// A released held push: held again if the commit fails (its record, less the seq, is the
        /// queue entry's).
        var wasHeld = false
    }

    /// Appends a notification with its seq to the device's queue, not yet committed.
    func enqueue(
        _ record: AcceptedPush,
        delivery: DeliveryKind,
        carrier: String? = nil,
        on device: DeviceState,
        keepalive: Bool = false
    ) -> QueuedEntry {
        let entry = QueuedNotification(record: record, committed: false, delivery: delivery, carrier: carrier)
        entry.sentInKeepalive = keepalive
        entry.sent = keepalive
        device.queue.append(entry)
        enteredMemory(record)
        withQueue[device.id] = device
        return QueuedEntry(deviceID: device.id, seq: record.seq ?? 0)
    }

    /// A held push the scheduler released: it gets the device's next seq and joins its queue.
    /// `carrierAPNsID` names the priority-10 push a piggyback rode on.
    @discardableResult
    func releaseHeld(
        _ release: Release,
        carrierAPNsID: String? = nil,
        keepalive: Bool = false,
        into commands: inout [StoreCommand],
        entries: inout [QueuedEntry]
    ) -> AcceptedPush? {
        guard var record = held.removeValue(forKey: release.id) else { return nil }
        leftMemory(record)
        guard let device = devices[record.deviceID] else { return nil }
        device.heldCount -= 1
        let seq = takeSeq(device, into: &commands)
        record.seq = seq
        commands.append(.assignSeq(acceptanceID: record.acceptanceID, seq: seq))
        let carrier = release.kind == .piggyback ? carrierAPNsID : nil
        var entry = enqueue(record, delivery: release.kind, carrier: carrier, on: device, keepalive: keepalive)
        entry.wasHeld = true
        entries.append(entry)
        return record
    }

    /// Held pushes the scheduler gave up on: deleted and counted.
    /// Returns the dropped pushes, for the caller to hold again if the commit fails.
    @discardableResult
    func forget(_ drops: [Drop], into commands: inout [StoreCommand]) -> [AcceptedPush] {
        let records = forgetHeld(drops)
        if !records.isEmpty { commands.append(.remove(acceptanceIDs: records.map(\.acceptanceID))) }
        return records
    }

    /// Takes the dropped pushes out of the held set and counts them; returns them.
    func forgetHeld(_ drops: [Drop]) -> [AcceptedPush] {
        var records: [AcceptedPush] = []
        records.reserveCapacity(drops.count)
        for drop in drops {
            guard let record = held.removeValue(forKey: drop.id) else { continue }
            leftMemory(record)
            devices[record.deviceID]?.heldCount -= 1
            counters.recordDrop(drop.reason, count: 1)
            dropped(record, drop.reason)
            records.append(record)
        }
        return records
    }

    /// Releases and drops of a wake event or tick, with no push of its own.
    func apply(
        _ output: SchedulerOutput,
        keepalive: Bool = false,
        into commands: inout [StoreCommand],
        entries: inout [QueuedEntry]
    ) -> [AcceptedPush] {
        var released: [AcceptedPush] = []
        for release in output.releases {
            if let record = releaseHeld(release, keepalive: keepalive, into: &commands, entries: &entries) {
                released.append(record)
            }
        }
        forget(output.drops, into: &commands)
        forget(output.fetchTimeouts, into: &commands)
        return released
    }

    /// Adds the bucket levels the scheduler changed, commits, then marks the new queue entries
    /// committed and writes them; a failed commit takes them back out of the queues, and the
    /// released held pushes among them (still held on disk) are held again (`holdAgain`).
    func finish(_ commands: [StoreCommand], entries: [QueuedEntry], then: @escaping (Result<Void, StoreError>) -> Void)
    {
        var commands = commands
        if let buckets = bucketCommand() { commands.append(buckets) }
        if let fetchStates = fetchStateCommand() { commands.append(fetchStates) }
        armSchedulerTimer()
        guard !commands.isEmpty else {
            then(.success(()))
            return
        }
        commit(commands) { [self] result in
            let now = clock.nowMillis()
            for entry in entries {
                guard let device = devices[entry.deviceID],
                    let index = device.queue.lastIndex(where: { $0.seq == entry.seq })
                else { continue }
                switch result {
                case .success:
                    let queued = device.queue[index]
                    queued.committed = true
                    if entry.wasHeld {
                        metrics.holdDuration.record(millis: now - queued.record.acceptedAt)
                        if let wake = WakeKind(queued.delivery) { counters.piggybacked.add(wake) }
                        notable(.released, queued.record, queued.delivery.rawValue)
                    }
                case .failure:
                    var record = device.queue.remove(at: index).record
                    leftMemory(record)
                    queueShrank(device)
                    if entry.wasHeld {
                        record.seq = nil
                        holdAgain(record)
                    }
                }
            }
            // Once all are marked, so that a device's entries go out in one write. Pumping a
            // device a second time finds nothing new: cheaper than a set of devices per commit.
            if case .success = result {
                for entry in entries { if let device = devices[entry.deviceID] { pump(device) } }
            }
            then(result)
        }
    }

    /// A push taken out of the held set (released, or dropped for a newer one) by a commit that
    /// failed: it is still held on disk, so it is held here again (released by the next wake
    /// event) instead of waiting for a restart.
    func holdAgain(_ record: AcceptedPush) {
        guard let device = devices[record.deviceID], let app = registrations[record.push.deviceToken]?.app,
            scheduler.restoreHeld(SchedulerPush(record, app: app, nowOrNever: false), acceptedAt: record.acceptedAt)
        else { return }
        held[record.acceptanceID] = record
        enteredMemory(record)
        device.heldCount += 1
        armSchedulerTimer()
    }

    /// A record entered the held set or a device's queue: its cost counts against the budget
    /// until it leaves both.
    func enteredMemory(_ record: AcceptedPush) {
        queuedBudget.add(QueuedNotificationBudget.cost(payloadBytes: record.push.payload.count))
    }

    /// A record left the held set or a device's queue.
    func leftMemory(_ record: AcceptedPush) {
        queuedBudget.release(QueuedNotificationBudget.cost(payloadBytes: record.push.payload.count))
    }

    private func bucketCommand() -> StoreCommand? {
        let dirty = scheduler.drainDirtyBuckets()
        guard !dirty.isEmpty else { return nil }
        var records: [BucketRecord] = []
        records.reserveCapacity(dirty.devices.count + dirty.apps.count)
        for change in dirty.devices {
            guard let id = deviceIDs[change.handle] else { continue }
            records.append(
                BucketRecord(key: BucketRecord.deviceKey(id), level: change.bucket.level, at: change.bucket.at)
            )
        }
        for change in dirty.apps {
            guard let token = appTokens[change.handle] else { continue }
            records.append(
                BucketRecord(key: BucketRecord.appKey(token), level: change.bucket.level, at: change.bucket.at)
            )
        }
        return records.isEmpty ? nil : .saveBuckets(records)
    }

    /// One timer per shard, for the scheduler's earliest deadline (budget refills, deferral
    /// limits, expiry of held pushes): never a timer per device.
    func armSchedulerTimer() {
        guard !schedulerStopped, let deadline = scheduler.nextDeadline else {
            schedulerTimer?.cancel()
            schedulerTimer = nil
            schedulerTimerAt = .max
            return
        }
        if schedulerTimer != nil, schedulerTimerAt <= deadline { return }
        schedulerTimer?.cancel()
        schedulerTimerAt = deadline
        let delay = max(0, deadline - clock.nowMillis())
        let shard = NIOLoopBound(self, eventLoop: eventLoop)
        schedulerTimer = eventLoop.scheduleTask(in: .milliseconds(delay)) {
            let shard = shard.value
            shard.schedulerTimer = nil
            shard.schedulerTimerAt = .max
            shard.advanceScheduler()
        }
    }

    /// The gateway is stopping: the scheduler's timer is cancelled and not armed again.
    func stopSchedulerTimer() {
        schedulerStopped = true
        schedulerTimer?.cancel()
        schedulerTimer = nil
        schedulerTimerAt = .max
    }

    /// A reloaded policy, in force from now (`Scheduler.reconfigure` says what becomes of the
    /// buckets and held pushes); what it releases at once is queued and committed like any
    /// release, and the buckets it changed are saved in the same commit.
    func reconfigure(scheduler configuration: SchedulerConfiguration) throws(SchedulerConfigurationError) {
        let output = try scheduler.reconfigure(configuration, now: clock.nowMillis()) { [self] app in
            appTokens[app].flatMap { registrations[$0]?.topic }
        }
        var commands: [StoreCommand] = []
        var entries: [QueuedEntry] = []
        _ = apply(output, into: &commands, entries: &entries)
        finish(commands, entries: entries) { _ in }
    }

    /// Runs the scheduler's due work: budget releases, deferral limits, expiry of held pushes.
    func advanceScheduler() {
        var commands: [StoreCommand] = []
        var entries: [QueuedEntry] = []
        _ = apply(scheduler.advance(now: clock.nowMillis()), into: &commands, entries: &entries)
        finish(commands, entries: entries) { _ in }
    }
}
