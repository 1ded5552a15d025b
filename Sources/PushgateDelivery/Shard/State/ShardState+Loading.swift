import NIOCore
import PushgateModel
import PushgateScheduler
import PushgateStore

// Restoring the shard from the store at start.
extension ShardState {
    func load(devices records: [DeviceRecord]) {
        let now = clock.nowMillis()
        for record in records {
            let handle = scheduler.addDevice(now: now)
            deviceIDs[handle] = record.id
            devices[record.id] = DeviceState(
                id: record.id,
                secretHash: record.secretHash,
                handle: handle,
                lastSeq: record.lastSeq,
                offlineSince: now
            )
        }
    }

    func load(registrations records: [RegistrationRecord]) {
        for var record in records {
            record.topic = interned(record.topic)
            var registration = RegistrationState(
                deviceID: record.deviceID,
                topic: record.topic,
                kind: record.kind,
                applicationServerKey: record.applicationServerKey,
                unregisteredAt: record.unregisteredAt
            )
            if record.unregisteredAt == nil, let device = devices[record.deviceID] {
                device.tokensByTopic[record.topic] = record.token
                if let app = scheduler.addApp(device: device.handle, topic: record.topic) {
                    registration.app = app
                    appTokens[app] = record.token
                    if let state = record.appState {
                        _ = scheduler.setAppState(app, state)
                    }
                }
            }
            registrations[record.token] = registration
        }
        let unregistered = records.compactMap { record in record.unregisteredAt.map { (at: $0, token: record.token) } }
        tombstones.append(contentsOf: unregistered.sorted { $0.at < $1.at })
    }

    /// Bucket levels as they were: a restart refills nothing beyond what the elapsed time gives.
    func load(buckets records: [BucketRecord]) {
        for record in records {
            let snapshot = BucketSnapshot(level: record.level, at: record.at)
            if record.key.hasPrefix("device:"), let device = devices[String(record.key.dropFirst("device:".count))] {
                scheduler.restoreBucket(device: device.handle, snapshot)
            } else if record.key.hasPrefix("app:"),
                let app = registrations[String(record.key.dropFirst("app:".count))]?.app
            {
                scheduler.restoreBucket(app: app, snapshot)
            }
        }
        _ = scheduler.drainDirtyBuckets()
    }

    /// Returns the commands that delete what nothing can deliver.
    func load(notifications records: [AcceptedPush]) -> [StoreCommand] {
        // Queues in seq order: seqs are assigned at release, so acceptance order (the store's)
        // can differ (a held push released after a later stored one).
        var orphans: [UInt64] = []
        let records = records.map { record in
            var record = record
            record.push.topic = interned(record.push.topic)
            return record
        }
        for record in records.filter({ $0.seq != nil }).sorted(by: { $0.seq! < $1.seq! }) {
            guard let device = devices[record.deviceID] else {
                orphans.append(record.acceptanceID)
                continue
            }
            device.queue.append(QueuedNotification(record: record, committed: true, delivery: .stored, loaded: true))
            enteredMemory(record)
            withQueue[device.id] = device
        }
        for record in records where record.seq == nil {
            guard let device = devices[record.deviceID] else {
                orphans.append(record.acceptanceID)
                continue
            }
            if let app = registrations[record.push.deviceToken]?.app,
                scheduler.restoreHeld(SchedulerPush(record, app: app, nowOrNever: false), acceptedAt: record.acceptedAt)
            {
                held[record.acceptanceID] = record
                enteredMemory(record)
                device.heldCount += 1
            } else {
                orphans.append(record.acceptanceID)
            }
        }
        // Of a device or registration that no longer exists: nothing can deliver them. (Device
        // deletion names every row of the device; this is the net for any row it missed.)
        guard !orphans.isEmpty else { return [] }
        counters.recordDrop(.unregistered, count: orphans.count)
        return [.remove(acceptanceIDs: orphans)]
    }
}

// Devices that move between gateway nodes sharing one database.
extension ShardState {
    /// Takes one device over from the store's records (its registrations, notifications,
    /// buckets and fetch figures), under `owner`: the node just claimed it. Returns the commands
    /// that delete what nothing can deliver.
    func adopt(_ snapshot: ShardSnapshot, owner: DeviceOwner) -> [StoreCommand] {
        ownsDevices = true
        // Already here (created on this node, or claimed again at a new epoch): only the claim
        // changes; what memory holds of it is newer than the records.
        if let id = snapshot.devices.first?.id, let device = devices[id] {
            device.owner = owner
            return []
        }
        load(devices: snapshot.devices)
        for record in snapshot.devices { devices[record.id]?.owner = owner }
        load(registrations: snapshot.registrations)
        load(buckets: snapshot.buckets)
        load(fetchStates: snapshot.fetchStates)
        return load(notifications: snapshot.notifications) + load(fetchWindows: snapshot.fetchWindows)
    }

    /// Forgets a device another node owns now: everything held in memory for it goes, nothing of
    /// it in the store (its new owner has it). Returns the device (its stream, for the caller to
    /// end), nil when it was not here.
    func release(_ id: String) -> DeviceState? {
        guard let device = devices[id] else { return nil }
        let stream = device.stream
        setStream(nil, of: device)
        device.stream = stream
        for token in device.tokensByTopic.values {
            if let app = registrations[token]?.app { appTokens[app] = nil }
            registrations[token] = nil
        }
        // Taken out of the scheduler without a drop: the held pushes stay held in the store.
        for drop in scheduler.removeDevice(device.handle) {
            if let record = held.removeValue(forKey: drop.id) { leftMemory(record) }
            heldUnannounced[drop.id] = nil
        }
        deviceIDs[device.handle] = nil
        for entry in device.queue { leftMemory(entry.record) }
        devices[id] = nil
        withQueue[id] = nil
        return device
    }
}
