import PushgateModel
import PushgateScheduler
import PushgateStore

// The pieces plans are made of (releases, drops, sequence numbers, the scheduler's figures), and
// the two ends of a plan: confirmed once committed, or restored when the commit fails.
extension ShardState {
    /// Appends a notification with its seq to the device's queue, not yet committed.
    func enqueue(
        _ record: AcceptedPush,
        delivery: DeliveryKind,
        carrier: String? = nil,
        on device: DeviceState,
        keepalive: Bool = false,
        into plan: inout ShardPlan,
        released: Bool = false
    ) {
        let entry = QueuedNotification(record: record, committed: false, delivery: delivery, carrier: carrier)
        entry.sentInKeepalive = keepalive
        entry.sent = keepalive
        device.queue.append(entry)
        enteredMemory(record)
        withQueue[device.id] = device
        plan.entries.append(PlannedEntry(deviceID: device.id, seq: record.seq ?? 0, released: released))
    }

    /// A held push the scheduler released: it gets the device's next seq and joins its queue.
    /// `carrierAPNsID` names the priority-10 push a piggyback rode on.
    @discardableResult
    func release(
        _ release: Release,
        carrierAPNsID: String? = nil,
        keepalive: Bool = false,
        into plan: inout ShardPlan
    ) -> AcceptedPush? {
        guard var record = held.removeValue(forKey: release.id) else { return nil }
        leftMemory(record)
        guard let device = devices[record.deviceID] else { return nil }
        device.heldCount -= 1
        plan.restorations.append(.hold(record))
        let seq = takeSeq(device, into: &plan)
        record.seq = seq
        plan.commands.append(.assignSeq(acceptanceID: record.acceptanceID, seq: seq))
        let carrier = release.kind == .piggyback ? carrierAPNsID : nil
        enqueue(
            record,
            delivery: release.kind,
            carrier: carrier,
            on: device,
            keepalive: keepalive,
            into: &plan,
            released: true
        )
        return record
    }

    /// Held pushes the scheduler gave up on: out of the held set, counted, announced, and
    /// deleted by the plan. Returns them. Not held again if the commit fails: most drops are
    /// due to time (expiry) or to the app's state, and held again they would be dropped again
    /// at once, a loop of failing commits while the store cannot commit; a restart drops them
    /// from the disk. (A push's own drops are held again: see `accept`.)
    @discardableResult
    func dropHeld(_ drops: [Drop], into plan: inout ShardPlan) -> [AcceptedPush] {
        let records = takeHeld(drops, into: &plan)
        if !records.isEmpty { plan.commands.append(.remove(acceptanceIDs: records.map(\.acceptanceID))) }
        return records
    }

    /// Takes dropped pushes out of the held set, counts and announces them; returns them.
    func takeHeld(_ drops: [Drop], into plan: inout ShardPlan) -> [AcceptedPush] {
        let records = takeHeld(drops)
        plan.devices.formUnion(records.map(\.deviceID))
        return records
    }

    private func takeHeld(_ drops: [Drop]) -> [AcceptedPush] {
        var records: [AcceptedPush] = []
        records.reserveCapacity(drops.count)
        for drop in drops {
            guard let record = held.removeValue(forKey: drop.id) else { continue }
            leftMemory(record)
            devices[record.deviceID]?.heldCount -= 1
            counters.recordDrop(drop.reason, count: 1)
            announceDrop(record, drop.reason)
            records.append(record)
        }
        return records
    }

    /// Queued notifications that leave undelivered (already out of their queue: see
    /// `takeUndelivered`): counted, announced, and deleted by the plan.
    func dropQueued(_ records: [AcceptedPush], _ reason: DropReason, into plan: inout ShardPlan) {
        guard !records.isEmpty else { return }
        plan.devices.formUnion(records.map(\.deviceID))
        counters.recordDrop(reason, count: records.count)
        for record in records { announceDrop(record, reason) }
        plan.commands.append(.remove(acceptanceIDs: records.map(\.acceptanceID)))
    }

    /// The releases and drops of a wake event or tick, with no push of its own. Returns the
    /// released pushes, with their seqs.
    @discardableResult
    func apply(_ output: SchedulerOutput, keepalive: Bool = false, into plan: inout ShardPlan) -> [AcceptedPush] {
        var released: [AcceptedPush] = []
        for release in output.releases {
            if let record = self.release(release, keepalive: keepalive, into: &plan) { released.append(record) }
        }
        dropHeld(output.drops, into: &plan)
        closeTimedOut(output.fetchTimeouts, into: &plan)
        return released
    }

    /// Adds what the scheduler changed on the way (bucket levels, fetch figures), so that the
    /// plan's commit carries them, and, on a node of several, fences the commit with the node's
    /// ownership of every device it changes: the last step of planning.
    func seal(_ plan: inout ShardPlan) {
        if let buckets = bucketCommand() { plan.commands.append(buckets) }
        if let fetchStates = fetchStateCommand() { plan.commands.append(fetchStates) }
        plan.commands.insert(contentsOf: fences(for: plan), at: 0)
    }

    /// `fence` commands for the owned devices among those the plan changes (none on a gateway
    /// alone on its store, whose devices have no owner), in device order.
    private func fences(for plan: ShardPlan) -> [StoreCommand] {
        guard ownsDevices else { return [] }
        var changed = plan.devices
        for entry in plan.entries { changed.insert(entry.deviceID) }
        for command in plan.commands { changed.formUnion(devices(changedBy: command)) }
        return changed.sorted().compactMap { id in
            guard let owner = self.devices[id]?.owner else { return nil }
            return .fence(deviceID: id, lease: owner.lease, epoch: owner.epoch)
        }
    }

    /// The devices a command changes, as far as the command or this shard can tell (a `remove`
    /// names only notifications: its devices are in `ShardPlan.devices`).
    private func devices(changedBy command: StoreCommand) -> [String] {
        if let id = command.deviceID { return [id] }
        switch command {
        case .unregister(let token, _), .setAppState(let token, _):
            return registrations[token].map { [$0.deviceID] } ?? []
        case .saveBuckets(let records):
            return records.compactMap { record in
                if record.key.hasPrefix("device:") { return String(record.key.dropFirst("device:".count)) }
                return registrations[String(record.key.dropFirst("app:".count))]?.deviceID
            }
        case .saveFetchStates(let states):
            return states.compactMap { registrations[$0.token]?.deviceID }
        default:
            return []
        }
    }

    // MARK: The two ends of a plan

    /// The plan committed: its queue entries may be written. Returns the devices that have
    /// something new to write, once each.
    func confirm(_ plan: ShardPlan) -> [DeviceState] {
        let now = clock.nowMillis()
        var touched: [DeviceState] = []
        for entry in plan.entries {
            guard let device = devices[entry.deviceID], let queued = device.queue.last(where: { $0.seq == entry.seq })
            else { continue }
            queued.committed = true
            if entry.released {
                metrics.holdDuration.record(millis: now - queued.record.acceptedAt)
                if let wake = WakeKind(queued.delivery) { counters.piggybacked.add(wake) }
                notable(.released, queued.record, queued.delivery.rawValue)
            }
            if !touched.contains(where: { $0 === device }) { touched.append(device) }
        }
        return touched
    }

    /// The plan's commit failed: memory is put back as the disk has it. Its queue entries leave
    /// their queues, then its restorations are undone, newest first.
    func restore(_ plan: ShardPlan) {
        for entry in plan.entries.reversed() {
            guard let device = devices[entry.deviceID],
                let index = device.queue.lastIndex(where: { $0.seq == entry.seq })
            else { continue }
            leftMemory(device.queue.remove(at: index).record)
            queueShrank(device)
        }
        for restoration in plan.restorations.reversed() {
            switch restoration {
            case .unhold(let acceptanceID, let app):
                heldUnannounced[acceptanceID] = nil
                guard let record = held.removeValue(forKey: acceptanceID) else { continue }
                leftMemory(record)
                devices[record.deviceID]?.heldCount -= 1
                scheduler.withdrawHeld(id: acceptanceID, app: app)
            case .hold(let record):
                holdAgain(record)
            case .ackDeletions(let deviceID, let deletions):
                devices[deviceID]?.uncommittedAcks.insert(contentsOf: deletions, at: 0)
            case .createdDevice(let id, let handle):
                devices[id] = nil
                deviceIDs[handle] = nil
                _ = scheduler.removeDevice(handle)
            case .registered(let token, let deviceID, let topic, let app):
                registrations[token] = nil
                if let app {
                    appTokens[app] = nil
                    _ = scheduler.removeApp(app)
                }
                if let device = devices[deviceID], device.tokensByTopic[topic] == token {
                    device.tokensByTopic[topic] = nil
                }
            }
        }
        // A reservation that did not reach the disk is made again by the next seq or ack.
        for case .reserveSeqs(let deviceID, _) in plan.commands { devices[deviceID]?.reservedSeq = 0 }
    }

    /// A push that is held on disk but no longer here: held again.
    private func holdAgain(_ record: AcceptedPush) {
        var record = record
        record.seq = nil
        guard let device = devices[record.deviceID], let app = registrations[record.push.deviceToken]?.app,
            scheduler.restoreHeld(SchedulerPush(record, app: app, nowOrNever: false), acceptedAt: record.acceptedAt)
        else { return }
        held[record.acceptanceID] = record
        enteredMemory(record)
        device.heldCount += 1
    }

    // MARK: Sequence numbers

    /// Seqs reserved on disk at a time: a restart continues after the block, so most pushes and
    /// acks write no device row (at most this many seqs are skipped per restart).
    private static let seqReservationBlock: UInt64 = 1024

    /// The device's next seq. Passing its reservation reserves the next block in the same commit.
    func takeSeq(_ device: DeviceState, into plan: inout ShardPlan) -> UInt64 {
        let seq = device.nextSeq
        device.nextSeq += 1
        reserveSeqs(of: device, through: seq, into: &plan)
        return seq
    }

    func reserveSeqs(of device: DeviceState, through seq: UInt64, into plan: inout ShardPlan) {
        guard seq > device.reservedSeq else { return }
        // Seqs are stored as signed 64-bit integers: never reserve past that.
        let through = max(seq, min(seq &+ Self.seqReservationBlock - 1, UInt64(Int64.max)))
        plan.commands.append(.reserveSeqs(deviceID: device.id, through: through))
        device.reservedSeq = through
    }

    // MARK: The scheduler's figures

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
}
