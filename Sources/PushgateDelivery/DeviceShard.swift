import Logging
import NIOCore
import PushgateModel
import PushgateCrypto
import PushgateScheduler
import PushgateStore
import PushgateTransport

/// The devices, registrations and queues of one shard, owned by one event loop.
///
/// Every method runs on `eventLoop`; the core routes each request here by the shard byte of the
/// device id or token, so no lock is taken on the delivery path. State changes are made in
/// memory first, committed to the store, and acknowledged (to the provider or agent) only when
/// the commit completes; a failed commit is undone.
///
/// The shard's `Scheduler` (pure, no I/O) decides what each push, wake event and tick releases;
/// this class turns its decisions into queue entries with sequence numbers, store commands and
/// stream writes. Held pushes keep their records here (`held`) and on disk with no seq.
final class DeviceShard: @unchecked Sendable {
    let eventLoop: any EventLoop
    private let store: any NotificationStore
    private let clock: any DeliveryClock
    private let configuration: DeliveryConfiguration
    private let counters: DeliveryCounters
    private let logger: Logger
    private let nextAcceptanceID: @Sendable () -> UInt64
    /// Store completions come back through it, many per loop task.
    private let completions: LoopInbox

    private var devices: [String: DeviceState] = [:]
    private var registrations: [String: RegistrationState] = [:]
    /// Devices with an open stream (for heartbeats).
    private var online: [String: DeviceState] = [:]
    /// Devices with queued notifications (for the expiry sweep).
    private var withQueue: Set<String> = []
    private var streamGenerations: UInt64 = 0

    private let scheduler: Scheduler
    /// Records of the pushes the scheduler holds, by acceptance id.
    private var held: [UInt64: AcceptedPush] = [:]
    /// Who the scheduler's handles are, for bucket keys and drops.
    private var deviceIDs: [DeviceHandle: String] = [:]
    private var appTokens: [AppHandle: String] = [:]
    /// The one timer of the shard's scheduler, armed for its next deadline.
    private var schedulerTimer: Scheduled<Void>?
    private var schedulerTimerAt: Int64 = .max

    init(
        eventLoop: any EventLoop,
        store: any NotificationStore,
        clock: any DeliveryClock,
        configuration: DeliveryConfiguration,
        counters: DeliveryCounters,
        logger: Logger,
        nextAcceptanceID: @escaping @Sendable () -> UInt64
    ) throws(SchedulerConfigurationError) {
        self.eventLoop = eventLoop
        self.store = store
        self.clock = clock
        self.configuration = configuration
        self.counters = counters
        self.logger = logger
        self.nextAcceptanceID = nextAcceptanceID
        self.completions = LoopInbox(loop: eventLoop)
        self.scheduler = try Scheduler(configuration: configuration.scheduler)
    }

    // MARK: Loading

    func load(devices records: [DeviceRecord]) {
        let now = clock.nowMillis()
        for record in records {
            let handle = scheduler.addDevice(now: now)
            deviceIDs[handle] = record.id
            devices[record.id] = DeviceState(
                id: record.id,
                secretHash: record.secretHash,
                handle: handle,
                lastSeq: record.lastSeq
            )
        }
    }

    func load(registrations records: [RegistrationRecord]) {
        for record in records {
            var registration = RegistrationState(
                deviceID: record.deviceID,
                topic: record.topic,
                unregisteredAt: record.unregisteredAt
            )
            if record.unregisteredAt == nil, let device = devices[record.deviceID] {
                device.tokensByTopic[record.topic] = record.token
                if let app = scheduler.addApp(device: device.handle, topic: record.topic) {
                    registration.app = app
                    appTokens[app] = record.token
                    if let state = record.appState.flatMap(AppState.init(rawValue:)) {
                        _ = scheduler.setAppState(app, state)
                    }
                }
            }
            registrations[record.token] = registration
        }
    }

    /// Bucket levels as they were: a restart refills nothing beyond what the elapsed time gives.
    func load(buckets records: [BucketRecord]) {
        for record in records {
            let snapshot = BucketSnapshot(level: record.level, at: record.at)
            if record.key.hasPrefix("device:"), let device = devices[String(record.key.dropFirst("device:".count))] {
                scheduler.restoreBucket(device: device.handle, snapshot)
            } else if record.key.hasPrefix("app:"), let app = registrations[String(record.key.dropFirst("app:".count))]?.app {
                scheduler.restoreBucket(app: app, snapshot)
            }
        }
        _ = scheduler.drainDirtyBuckets()
    }

    func load(notifications records: [AcceptedPush]) {
        // Queues in seq order: seqs are assigned at release, so acceptance order (the store's)
        // can differ (a held push released after a later stored one).
        var orphans: [UInt64] = []
        for record in records.filter({ $0.seq != nil }).sorted(by: { $0.seq! < $1.seq! }) {
            guard let device = devices[record.deviceID] else {
                orphans.append(record.acceptanceID)
                continue
            }
            device.queue.append(QueuedNotification(record: record, committed: true, delivery: .stored))
            withQueue.insert(device.id)
            counters.add(queued: 1)
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
                device.heldCount += 1
                counters.add(held: 1)
            } else {
                orphans.append(record.acceptanceID)
            }
        }
        // Of a device or registration that no longer exists: nothing can deliver them. (Device
        // deletion names every row of the device; this is the net for any row it missed.)
        if !orphans.isEmpty {
            counters.recordDrop(.unregistered, count: orphans.count)
            commit([.remove(acceptanceIDs: orphans)]) { _ in }
        }
        armSchedulerTimer()
    }

    // MARK: Devices

    func createDevice(id: String, secretHash: [UInt8], promise: EventLoopPromise<Void>) {
        let now = clock.nowMillis()
        let record = DeviceRecord(id: id, secretHash: secretHash, createdAt: now)
        let handle = scheduler.addDevice(now: now)
        deviceIDs[handle] = id
        devices[id] = DeviceState(id: id, secretHash: secretHash, handle: handle, lastSeq: 0)
        commit([.createDevice(record)]) { [self] result in
            if case .failure = result {
                devices[id] = nil
                deviceIDs[handle] = nil
                _ = scheduler.removeDevice(handle)
            }
            promise.completeWith(result.mapError { Refusal.storeFailed($0) as any Error })
        }
    }

    /// The device if `secret` is its secret; nil otherwise (unknown device or wrong secret alike).
    func authenticate(deviceID: String, secret: String) -> DeviceState? {
        guard let device = devices[deviceID] else { return nil }
        return constantTimeEquals(SHA256.hash(secret.utf8), device.secretHash) ? device : nil
    }

    func register(deviceID: String, secret: String, topic: String, promise: EventLoopPromise<String>) {
        guard let device = authenticate(deviceID: deviceID, secret: secret) else {
            promise.fail(Refusal.unauthorized)
            return
        }
        if let token = device.tokensByTopic[topic] {
            if let committing = registrations[token]?.committing {
                promise.completeWith(committing)
            } else {
                promise.succeed(token)
            }
            return
        }
        let token: String
        do {
            token = try Identifiers.newToken(forDevice: deviceID)
        } catch {
            promise.fail(Refusal(.internalServerError, "\(error)"))
            return
        }
        let record = RegistrationRecord(token: token, deviceID: deviceID, topic: topic, createdAt: clock.nowMillis())
        let app = scheduler.addApp(device: device.handle, topic: topic)
        if let app { appTokens[app] = token }
        registrations[token] = RegistrationState(deviceID: deviceID, topic: topic, app: app, committing: promise.futureResult)
        device.tokensByTopic[topic] = token
        commit([.register(record)]) { [self] result in
            switch result {
            case .success:
                registrations[token]?.committing = nil
                promise.succeed(token)
            case .failure(let error):
                registrations[token] = nil
                if let app {
                    appTokens[app] = nil
                    _ = scheduler.removeApp(app)
                }
                if device.tokensByTopic[topic] == token { device.tokensByTopic[topic] = nil }
                promise.fail(Refusal.storeFailed(error))
            }
        }
    }

    func unregister(deviceID: String, secret: String, token: String, promise: EventLoopPromise<Void>) {
        guard let device = authenticate(deviceID: deviceID, secret: secret) else {
            promise.fail(Refusal.unauthorized)
            return
        }
        guard var registration = registrations[token], registration.deviceID == deviceID,
              registration.unregisteredAt == nil
        else {
            promise.fail(
                Refusal(.notFound, "no active registration \(token) on this device")
            )
            return
        }
        let now = clock.nowMillis()
        registration.unregisteredAt = now
        registrations[token] = registration
        device.tokensByTopic[registration.topic] = nil
        // Undelivered pushes for the app are dropped with it; delivered ones wait for their ack.
        let dropped = removeUndelivered(from: device) { $0.record.push.deviceToken == token }
        counters.recordDrop(.unregistered, count: dropped.count)
        counters.add(queued: -dropped.count)
        queueShrank(device)
        var commands: [StoreCommand] = [.unregister(token: token, at: now)]
        if !dropped.isEmpty { commands.append(.remove(acceptanceIDs: dropped)) }
        if let app = registration.app {
            forget(scheduler.removeApp(app), into: &commands)
            appTokens[app] = nil
            registration.app = nil
            registrations[token] = registration
        }
        commit(commands) { result in
            promise.completeWith(result.mapError { Refusal.storeFailed($0) as any Error })
        }
        armSchedulerTimer()
    }

    func deleteDevice(deviceID: String, secret: String, promise: EventLoopPromise<Void>) {
        guard let device = authenticate(deviceID: deviceID, secret: secret) else {
            promise.fail(Refusal.unauthorized)
            return
        }
        let now = clock.nowMillis()
        for token in device.tokensByTopic.values {
            registrations[token]?.unregisteredAt = now
            if let app = registrations[token]?.app { appTokens[app] = nil }
            registrations[token]?.app = nil
        }
        if let stream = device.stream {
            if let writer = stream.writer { finish(writer) }
            counters.connected(-1)
        }
        // Every notification of the device goes, held ones included.
        let acceptanceIDs = device.queue.map(\.record.acceptanceID) + forgetHeld(scheduler.removeDevice(device.handle))
        deviceIDs[device.handle] = nil
        counters.recordDrop(.unregistered, count: device.queue.count)
        counters.add(queued: -device.queue.count)
        devices[deviceID] = nil
        online[deviceID] = nil
        withQueue.remove(deviceID)
        commit([.deleteDevice(id: deviceID, at: now, acceptanceIDs: acceptanceIDs)]) { result in
            promise.completeWith(result.mapError { Refusal.storeFailed($0) as any Error })
        }
    }

    // MARK: Provider pushes

    func accept(_ push: Push, expiration: Expiration, promise: EventLoopPromise<Disposition>) {
        guard let registration = registrations[push.deviceToken] else {
            promise.fail(Refusal(.badDeviceToken, "no device has the token \(push.deviceToken)"))
            return
        }
        // Checked before the device: a deleted device's tokens are unregistered, not unknown.
        if let at = registration.unregisteredAt {
            promise.fail(
                Refusal(.unregistered, "the token was unregistered; stop sending to it",
                    timestamp: at
                )
            )
            return
        }
        guard let device = devices[registration.deviceID] else {
            promise.fail(Refusal(.badDeviceToken, "no device has the token \(push.deviceToken)"))
            return
        }
        guard registration.topic == push.topic else {
            promise.fail(
                Refusal(.deviceTokenNotForTopic, "the token is registered for \(registration.topic), not \(push.topic)"
                )
            )
            return
        }
        guard let app = registration.app else {
            promise.fail(Refusal(.internalServerError, "registration \(push.deviceToken) has no scheduler state"))
            return
        }
        let now = clock.nowMillis()
        let expiresAt: Int64
        switch expiration {
        case .defaultLifetime:
            expiresAt = now + configuration.scheduler.policy(forTopic: registration.topic).defaultExpirationMillis
        case .immediately:
            expiresAt = now + configuration.immediateGraceMillis
        case .at(let seconds):
            expiresAt = seconds.multipliedReportingOverflow(by: 1000).overflow ? .max : seconds * 1000
            if expiresAt <= now {
                counters.recordDisposition(.discarded)
                promise.succeed(.discarded)
                return
            }
        }
        guard device.queue.count + device.heldCount < configuration.maxQueuedPerDevice else {
            promise.fail(Refusal.deviceQueueFull(waiting: device.queue.count + device.heldCount))
            return
        }
        var record = AcceptedPush(
            acceptanceID: nextAcceptanceID(),
            deviceID: device.id,
            push: push,
            acceptedAt: now,
            expiresAt: expiresAt,
            seq: nil
        )
        let nowOrNever = expiration == .immediately
        guard let acceptance = scheduler.accept(SchedulerPush(record, app: app, nowOrNever: nowOrNever), now: now) else {
            promise.fail(Refusal(.internalServerError, "the scheduler does not know this registration"))
            return
        }

        // Usually an enqueue, now and then a seq reservation, and one entry: room for them up
        // front instead of growing the arrays on the way.
        var commands: [StoreCommand] = []
        commands.reserveCapacity(2)
        var entries: [QueuedEntry] = []
        entries.reserveCapacity(1)
        let disposition: Disposition
        switch acceptance.disposition {
        case .discarded:
            counters.recordDisposition(.discarded)
            promise.succeed(.discarded)
            forget(acceptance.drops, into: &commands)
            finish(commands, entries: []) { _ in }
            return
        case .stored:
            var replaced = false
            if let collapseID = record.push.collapseID {
                // The newest push with a collapse id replaces the stored one (APNs keeps one).
                let removed = removeUndelivered(from: device) {
                    $0.committed && $0.record.push.deviceToken == record.push.deviceToken && $0.record.push.collapseID == collapseID
                }
                if !removed.isEmpty {
                    replaced = true
                    commands.append(.remove(acceptanceIDs: removed))
                    counters.recordDrop(.coalesced, count: removed.count)
                    counters.add(queued: -removed.count)
                }
            }
            record.seq = takeSeq(device, into: &commands)
            commands.append(.enqueue(record))
            entries.append(enqueue(record, delivery: .stored, on: device))
            disposition = replaced ? .coalesced : .stored
        case .held, .coalesced:
            commands.append(.enqueue(record))
            held[record.acceptanceID] = record
            device.heldCount += 1
            counters.add(held: 1)
            disposition = acceptance.disposition
        case .delivered:
            // In acceptance order: what was held rides ahead of the push that woke the device.
            for release in acceptance.releases {
                if release.id == record.acceptanceID {
                    record.seq = takeSeq(device, into: &commands)
                    commands.append(.enqueue(record))
                    entries.append(enqueue(record, delivery: .immediate, on: device))
                } else {
                    releaseHeld(release, carrierAPNsID: record.push.apnsID, into: &commands, entries: &entries)
                }
            }
            disposition = .delivered
        }
        forget(acceptance.drops, into: &commands)
        let acceptanceID = record.acceptanceID
        finish(commands, entries: entries) { [self] result in
            switch result {
            case .success:
                counters.recordDisposition(disposition)
                promise.succeed(disposition)
            case .failure(let error):
                if held.removeValue(forKey: acceptanceID) != nil {
                    device.heldCount -= 1
                    counters.add(held: -1)
                    scheduler.withdrawHeld(id: acceptanceID, app: app)
                    armSchedulerTimer()
                }
                promise.fail(Refusal.storeFailed(error))
            }
        }
    }

    // MARK: Scheduler decisions

    /// A queue entry waiting for its commit.
    private struct QueuedEntry {
        var deviceID: String
        var seq: UInt64
        /// A released held push: held again if the commit fails (its record, less the seq, is the
        /// queue entry's).
        var wasHeld = false
    }

    /// Appends a notification with its seq to the device's queue, not yet committed.
    private func enqueue(
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
        withQueue.insert(device.id)
        counters.add(queued: 1)
        return QueuedEntry(deviceID: device.id, seq: record.seq ?? 0)
    }

    /// A held push the scheduler released: it gets the device's next seq and joins its queue.
    /// `carrierAPNsID` names the priority-10 push a piggyback rode on.
    @discardableResult
    private func releaseHeld(
        _ release: Release,
        carrierAPNsID: String? = nil,
        keepalive: Bool = false,
        into commands: inout [StoreCommand],
        entries: inout [QueuedEntry]
    ) -> AcceptedPush? {
        guard var record = held.removeValue(forKey: release.id), let device = devices[record.deviceID] else { return nil }
        device.heldCount -= 1
        counters.add(held: -1)
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
    private func forget(_ drops: [Drop], into commands: inout [StoreCommand]) {
        let ids = forgetHeld(drops)
        if !ids.isEmpty { commands.append(.remove(acceptanceIDs: ids)) }
    }

    /// Takes the dropped pushes out of the held set and counts them; returns their ids.
    private func forgetHeld(_ drops: [Drop]) -> [UInt64] {
        var ids: [UInt64] = []
        ids.reserveCapacity(drops.count)
        for drop in drops {
            guard let record = held.removeValue(forKey: drop.id) else { continue }
            devices[record.deviceID]?.heldCount -= 1
            counters.add(held: -1)
            counters.recordDrop(drop.reason, count: 1)
            ids.append(drop.id)
        }
        return ids
    }

    /// Releases and drops of a wake event or tick, with no push of its own.
    private func apply(
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
        return released
    }

    /// Adds the bucket levels the scheduler changed, commits, then marks the new queue entries
    /// committed and writes them; a failed commit takes them back out of the queues (their
    /// pushes stay held on disk and are released again after a restart).
    private func finish(_ commands: [StoreCommand], entries: [QueuedEntry], then: @escaping (Result<Void, StoreError>) -> Void) {
        var commands = commands
        if let buckets = bucketCommand() { commands.append(buckets) }
        armSchedulerTimer()
        guard !commands.isEmpty else {
            then(.success(()))
            return
        }
        commit(commands) { [self] result in
            for entry in entries {
                guard let device = devices[entry.deviceID],
                      let index = device.queue.lastIndex(where: { $0.seq == entry.seq })
                else { continue }
                switch result {
                case .success:
                    device.queue[index].committed = true
                case .failure:
                    var record = device.queue.remove(at: index).record
                    counters.add(queued: -1)
                    queueShrank(device)
                    if entry.wasHeld {
                        record.seq = nil
                        holdAgain(record, on: device)
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

    /// A released push whose seq did not reach the disk: it is still held there, so it is held
    /// here again (released by the next wake event) instead of waiting for a restart.
    private func holdAgain(_ record: AcceptedPush, on device: DeviceState) {
        guard let app = registrations[record.push.deviceToken]?.app,
              scheduler.restoreHeld(SchedulerPush(record, app: app, nowOrNever: false), acceptedAt: record.acceptedAt)
        else { return }
        held[record.acceptanceID] = record
        device.heldCount += 1
        counters.add(held: 1)
        armSchedulerTimer()
    }

    private func bucketCommand() -> StoreCommand? {
        let dirty = scheduler.drainDirtyBuckets()
        guard !dirty.isEmpty else { return nil }
        var records: [BucketRecord] = []
        records.reserveCapacity(dirty.devices.count + dirty.apps.count)
        for change in dirty.devices {
            guard let id = deviceIDs[change.handle] else { continue }
            records.append(BucketRecord(key: BucketRecord.deviceKey(id), level: change.bucket.level, at: change.bucket.at))
        }
        for change in dirty.apps {
            guard let token = appTokens[change.handle] else { continue }
            records.append(BucketRecord(key: BucketRecord.appKey(token), level: change.bucket.level, at: change.bucket.at))
        }
        return records.isEmpty ? nil : .saveBuckets(records)
    }

    /// One timer per shard, for the scheduler's earliest deadline (budget refills, deferral
    /// limits, expiry of held pushes): never a timer per device.
    private func armSchedulerTimer() {
        guard let deadline = scheduler.nextDeadline else {
            schedulerTimer?.cancel()
            schedulerTimer = nil
            schedulerTimerAt = .max
            return
        }
        if schedulerTimer != nil, schedulerTimerAt <= deadline { return }
        schedulerTimer?.cancel()
        schedulerTimerAt = deadline
        let delay = max(0, deadline - clock.nowMillis())
        schedulerTimer = eventLoop.scheduleTask(in: .milliseconds(delay)) { [self] in
            schedulerTimer = nil
            schedulerTimerAt = .max
            advanceScheduler()
        }
    }

    /// Runs the scheduler's due work: budget releases, deferral limits, expiry of held pushes.
    func advanceScheduler() {
        var commands: [StoreCommand] = []
        var entries: [QueuedEntry] = []
        _ = apply(scheduler.advance(now: clock.nowMillis()), into: &commands, entries: &entries)
        finish(commands, entries: entries) { _ in }
    }

    // MARK: Keep-alives and device state

    /// A wake event: what the scheduler held for the device goes in the response (and is acked
    /// like any other notification).
    func keepalive(deviceID: String, secret: String, promise: EventLoopPromise<ByteBuffer>) {
        guard let device = authenticate(deviceID: deviceID, secret: secret) else {
            promise.fail(Refusal.unauthorized)
            return
        }
        var commands: [StoreCommand] = []
        var entries: [QueuedEntry] = []
        let released = apply(
            scheduler.keepalive(device.handle, now: clock.nowMillis()),
            keepalive: true,
            into: &commands,
            entries: &entries
        )
        finish(commands, entries: entries) { [self] result in
            switch result {
            case .success:
                var body = ByteBuffer(string: "{\"notifications\":[")
                for (index, record) in released.enumerated() {
                    if index > 0 { body.writeInteger(UInt8(ascii: ",")) }
                    EventStreamEncoder.writeJSON(record, delivery: .keepalive, carrier: nil, into: &body)
                    counters.recordDelivery(.keepalive)
                }
                body.writeString("]}")
                promise.succeed(body)
            case .failure(let error):
                promise.fail(Refusal.storeFailed(error))
            }
        }
    }

    /// Power and app states the device reports. Topics must be registered on the device.
    func setState(
        deviceID: String,
        secret: String,
        power: DevicePower?,
        apps: [(topic: String, state: AppState)],
        promise: EventLoopPromise<Void>
    ) {
        guard let device = authenticate(deviceID: deviceID, secret: secret) else {
            promise.fail(Refusal.unauthorized)
            return
        }
        var targets: [(token: String, app: AppHandle, state: AppState)] = []
        for (topic, state) in apps {
            guard let token = device.tokensByTopic[topic], let app = registrations[token]?.app else {
                promise.fail(
                    Refusal(.badTopic, "\(topic) is not registered on this device; register it first")
                )
                return
            }
            targets.append((token, app, state))
        }
        var commands: [StoreCommand] = []
        var entries: [QueuedEntry] = []
        for target in targets {
            forget(scheduler.setAppState(target.app, target.state), into: &commands)
            // What the scheduler applied: `background` leaves a terminated app terminated.
            let applied = scheduler.appState(target.app) ?? target.state
            commands.append(.setAppState(token: target.token, state: applied.rawValue))
        }
        if let power {
            _ = apply(scheduler.setPower(device.handle, power, now: clock.nowMillis()), into: &commands, entries: &entries)
        }
        finish(commands, entries: entries) { result in
            promise.completeWith(result.mapError { Refusal.storeFailed($0) as any Error })
        }
    }

    // MARK: Event streams

    /// Makes a new stream the device's current one (ending any older one) before its head is
    /// sent; `lastEventID` acknowledges up to that seq first. Succeeds with the stream's
    /// generation, which `bind` and `abandon` name.
    func openStream(deviceID: String, secret: String, lastEventID: UInt64?, promise: EventLoopPromise<UInt64>) {
        guard let device = authenticate(deviceID: deviceID, secret: secret) else {
            promise.fail(Refusal.unauthorized)
            return
        }
        if let old = device.stream {
            if let writer = old.writer { finish(writer) }
        } else {
            counters.connected(1)
        }
        streamGenerations += 1
        let now = clock.nowMillis()
        device.stream = StreamBinding(generation: streamGenerations, now: now)
        device.resetStreamProgress()
        online[deviceID] = device
        if let lastEventID { acknowledge(device, upTo: lastEventID, onlySent: false, promise: nil) }
        // A wake event: stored pushes are already queued, held ones follow them (`online`).
        var commands: [StoreCommand] = []
        var entries: [QueuedEntry] = []
        _ = apply(scheduler.connect(device.handle, now: now), into: &commands, entries: &entries)
        finish(commands, entries: entries) { _ in }
        promise.succeed(streamGenerations)
    }

    /// The stream's head is out: events can be written to it.
    func bind(deviceID: String, generation: UInt64, writer: ResponseBodyWriter) {
        guard let device = devices[deviceID], let stream = device.stream, stream.generation == generation else {
            finish(writer)
            return
        }
        stream.writer = writer
        pump(device)
    }

    /// The stream ended, or its head could not be sent. A newer stream is left alone.
    func close(deviceID: String, generation: UInt64) {
        guard let device = devices[deviceID], let stream = device.stream, stream.generation == generation else { return }
        disconnect(device)
    }

    private func disconnect(_ device: DeviceState) {
        scheduler.disconnect(device.handle)
        armSchedulerTimer()
        device.stream = nil
        device.resetStreamProgress()
        online[device.id] = nil
        counters.connected(-1)
    }

    func ack(deviceID: String, secret: String, upTo: UInt64, promise: EventLoopPromise<Void>) {
        guard let device = authenticate(deviceID: deviceID, secret: secret) else {
            promise.fail(Refusal.unauthorized)
            return
        }
        acknowledge(device, upTo: upTo, onlySent: true, promise: promise)
    }

    /// Cumulative ack. Only committed notifications can have been seen, so removal stops at the
    /// first uncommitted one; an ack beyond anything assigned is clamped.
    /// `onlySent`: an ack (`POST .../ack`) may name a seq from a keep-alive response, below which
    /// older pushes may not have been sent yet, so it stops below the first one never sent. A
    /// `Last-Event-ID` names an event of a stream, and a stream sends every seq below its events
    /// (or they went in keep-alive responses), so it acks all of them, also after a restart.
    private func acknowledge(_ device: DeviceState, upTo requested: UInt64, onlySent: Bool, promise: EventLoopPromise<Void>?) {
        var upTo = min(requested, device.nextSeq - 1)
        if onlySent {
            // Everything before `deliveredCount` went out on this stream or in a keep-alive.
            var index = device.queue.index(device.queue.startIndex, offsetBy: device.deliveredCount)
            while index != device.queue.endIndex, device.queue[index].sent { index = device.queue.index(after: index) }
            if index != device.queue.endIndex { upTo = min(upTo, device.queue[index].seq - 1) }
        }
        guard upTo > device.ackedSeq else {
            promise?.succeed()
            return
        }
        var removed: [UInt64] = []
        while let first = device.queue.first, first.committed, first.seq <= upTo {
            device.queue.removeFirst()
            removed.append(first.record.acceptanceID)
            if device.deliveredCount > 0 {
                device.deliveredCount -= 1
                device.unackedBytes -= first.eventSize
            }
        }
        counters.add(queued: -removed.count)
        counters.acknowledged(removed.count)
        queueShrank(device)
        device.ackedSeq = upTo
        var commands: [StoreCommand] = [.ack(deviceID: device.id, acceptanceIDs: removed)]
        // After a restart nothing is reserved yet: the seqs this ack deletes must stay covered.
        reserveSeqs(of: device, through: upTo, into: &commands)
        commit(commands) { result in
            promise?.completeWith(result.mapError { Refusal.storeFailed($0) as any Error })
        }
        pump(device)
    }

    /// Writes what the device may receive now: committed, unexpired, in sequence order, within
    /// the unacked window.
    private func pump(_ device: DeviceState) {
        guard let stream = device.stream, let writer = stream.writer else { return }
        let now = clock.nowMillis()
        var buffer: ByteBuffer?
        var expired: [UInt64] = []
        while device.deliveredCount < device.queue.count {
            let entry = device.queue[device.queue.index(device.queue.startIndex, offsetBy: device.deliveredCount)]
            guard entry.committed else { break }
            if entry.sentInKeepalive {
                device.deliveredCount += 1
                continue
            }
            // Never written again once expired, even if an earlier stream had it (PRODUCT.md:
            // expired pushes are never delivered); the sweep leaves sent ones to this check.
            if entry.record.expiresAt <= now {
                device.queue.remove(at: device.queue.index(device.queue.startIndex, offsetBy: device.deliveredCount))
                expired.append(entry.record.acceptanceID)
                continue
            }
            guard device.unackedBytes < configuration.unackedWindowBytes else { break }
            if buffer == nil { buffer = ByteBufferAllocator().buffer(capacity: EventStreamEncoder.estimatedSize(of: entry.record)) }
            let before = buffer!.writerIndex
            EventStreamEncoder.writeNotification(entry.record, delivery: entry.delivery, carrier: entry.carrier, into: &buffer!)
            let size = buffer!.writerIndex - before
            entry.eventSize = size
            entry.sent = true
            device.unackedBytes += size
            device.deliveredCount += 1
            counters.recordDelivery(entry.delivery)
        }
        if !expired.isEmpty {
            dropExpired(expired, from: device)
        }
        guard let buffer else { return }
        stream.lastWriteMillis = now
        write(buffer, to: writer)
    }

    // MARK: Maintenance

    /// Heartbeats for silent streams, so proxies and agents see a live connection.
    func heartbeat() {
        let now = clock.nowMillis()
        for device in online.values {
            guard let stream = device.stream, let writer = stream.writer,
                  now - stream.lastWriteMillis >= configuration.heartbeatIntervalMillis
            else { continue }
            stream.lastWriteMillis = now
            write(EventStreamEncoder.heartbeat, to: writer)
        }
    }

    /// Drops expired notifications that were not yet delivered.
    func sweepExpired() {
        let now = clock.nowMillis()
        for deviceID in withQueue {
            guard let device = devices[deviceID] else { continue }
            let expired = removeUndelivered(from: device) { $0.committed && $0.record.expiresAt <= now }
            if !expired.isEmpty { dropExpired(expired, from: device) }
        }
    }

    private func dropExpired(_ ids: [UInt64], from device: DeviceState) {
        counters.recordDrop(.expired, count: ids.count)
        counters.add(queued: -ids.count)
        queueShrank(device)
        commit([.remove(acceptanceIDs: ids)]) { _ in }
    }

    /// After entries left the device's queue. An empty queue leaves the set the sweep walks and
    /// gives back the storage a backlog grew: a `CircularBuffer` never shrinks, so a device that
    /// once had thousands stored would hold their slots (a reference each: 128 KiB after 10,000)
    /// for as long as the process runs. Small queues keep theirs, so a connected device is not reallocated per push.
    private func queueShrank(_ device: DeviceState) {
        guard device.queue.isEmpty else { return }
        withQueue.remove(device.id)
        if device.queue.capacity > DeviceState.retainedQueueCapacity { device.queue = DeviceState.emptyQueue }
    }

    /// Slots the device's queue has room for; nil for an unknown device.
    func queueCapacity(deviceID: String) -> Int? { devices[deviceID]?.queue.capacity }

    /// Removes entries that match and were never sent (on any stream or in a keep-alive
    /// response); returns their ids. A sent one stays for its ack: the agent may be handling it.
    private func removeUndelivered(from device: DeviceState, where matches: (QueuedNotification) -> Bool) -> [UInt64] {
        func removable(_ entry: QueuedNotification) -> Bool { !entry.sent && matches(entry) }
        // Most calls (every push with a collapse id, every device at each sweep) match nothing:
        // the queue is copied only once one entry must go.
        let unsent = device.queue.index(device.queue.startIndex, offsetBy: device.deliveredCount)
        guard let first = device.queue[unsent...].firstIndex(where: removable) else { return [] }
        var kept = CircularBuffer<QueuedNotification>(initialCapacity: device.queue.count)
        kept.append(contentsOf: device.queue[..<first])
        var removed: [UInt64] = []
        for entry in device.queue[first...] {
            if removable(entry) { removed.append(entry.record.acceptanceID) } else { kept.append(entry) }
        }
        device.queue = kept
        return removed
    }

    // MARK: Plumbing

    /// Commits, then runs `then` back on this shard's loop. A failure is logged here once; the
    /// caller undoes its in-memory change and answers the request.
    private func commit(_ commands: [StoreCommand], then: @escaping (Result<Void, StoreError>) -> Void) {
        let continuation = NIOLoopBound(then, eventLoop: eventLoop)
        let shard = NIOLoopBound(self, eventLoop: eventLoop)
        let logger = self.logger
        let completions = self.completions
        store.commit(commands) { result in
            if case .failure(let error) = result {
                logger.error("store commit failed", metadata: ["error": "\(error)", "store.commands": "\(commands.count)"])
            }
            completions.submit {
                if case .failure = result { shard.value.forgetReservations(in: commands) }
                continuation.value(result)
            }
        }
    }

    // MARK: Sequence numbers

    /// Seqs reserved on disk at a time: a restart continues after the block, so most pushes and
    /// acks write no device row (at most this many seqs are skipped per restart).
    static let seqReservationBlock: UInt64 = 1024

    /// The device's next seq. Passing its reservation reserves the next block in the same commit.
    private func takeSeq(_ device: DeviceState, into commands: inout [StoreCommand]) -> UInt64 {
        let seq = device.nextSeq
        device.nextSeq += 1
        reserveSeqs(of: device, through: seq, into: &commands)
        return seq
    }

    private func reserveSeqs(of device: DeviceState, through seq: UInt64, into commands: inout [StoreCommand]) {
        guard seq > device.reservedSeq else { return }
        // Seqs are stored as SQLite integers (signed 64-bit): never reserve past that.
        let through = max(seq, min(seq &+ Self.seqReservationBlock - 1, UInt64(Int64.max)))
        commands.append(.reserveSeqs(deviceID: device.id, through: through))
        device.reservedSeq = through
    }

    /// A reservation that did not reach the disk is made again by the next seq or ack.
    private func forgetReservations(in commands: [StoreCommand]) {
        for case .reserveSeqs(let deviceID, _) in commands {
            devices[deviceID]?.reservedSeq = 0
        }
    }

    private func write(_ buffer: ByteBuffer, to writer: ResponseBodyWriter) {
        // The unacked window keeps the stream's queue under its high watermark; if it is full
        // anyway, the stream is reset so that the agent reconnects and gets everything again.
        if writer.eventLoop.inEventLoop {
            if writer.write(buffer) == .full { writer.cancel() }
        } else {
            writer.eventLoop.execute {
                if writer.write(buffer) == .full { writer.cancel() }
            }
        }
    }

    private func finish(_ writer: ResponseBodyWriter) {
        writer.eventLoop.execute { writer.finish() }
    }
}
