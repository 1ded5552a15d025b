import Logging
import NIOCore
import PushgateCore
import PushgateCrypto

import PushgateStore
import PushgateTransport

/// The devices, registrations and queues of one shard, owned by one event loop.
///
/// Every method runs on `eventLoop`; the core routes each request here by the shard byte of the
/// device id or token, so no lock is taken on the delivery path. State changes are made in
/// memory first, committed to the store, and acknowledged (to the provider or agent) only when
/// the commit completes; a failed commit is undone.
final class DeviceShard: @unchecked Sendable {
    let eventLoop: any EventLoop
    private let store: any NotificationStore
    private let clock: any DeliveryClock
    private let configuration: DeliveryConfiguration
    private let counters: DeliveryCounters
    private let logger: Logger
    private let nextAcceptanceID: @Sendable () -> UInt64

    private var devices: [String: DeviceState] = [:]
    private var registrations: [String: RegistrationState] = [:]
    /// Devices with an open stream (for heartbeats).
    private var online: [String: DeviceState] = [:]
    /// Devices with queued notifications (for the expiry sweep).
    private var withQueue: Set<String> = []
    private var streamGenerations: UInt64 = 0

    init(
        eventLoop: any EventLoop,
        store: any NotificationStore,
        clock: any DeliveryClock,
        configuration: DeliveryConfiguration,
        counters: DeliveryCounters,
        logger: Logger,
        nextAcceptanceID: @escaping @Sendable () -> UInt64
    ) {
        self.eventLoop = eventLoop
        self.store = store
        self.clock = clock
        self.configuration = configuration
        self.counters = counters
        self.logger = logger
        self.nextAcceptanceID = nextAcceptanceID
    }

    // MARK: Loading

    func load(devices records: [DeviceRecord]) {
        for record in records {
            devices[record.id] = DeviceState(
                id: record.id,
                secretHash: record.secretHash,
                ackedSeq: record.ackedSeq,
                lastSeq: record.lastSeq
            )
        }
    }

    func load(registrations records: [RegistrationRecord]) {
        for record in records {
            registrations[record.token] = RegistrationState(
                deviceID: record.deviceID,
                topic: record.topic,
                unregisteredAt: record.unregisteredAt
            )
            if record.unregisteredAt == nil, let device = devices[record.deviceID] {
                device.tokensByTopic[record.topic] = record.token
            }
        }
    }

    func load(notifications records: [NotificationRecord]) {
        for record in records {
            guard let device = devices[record.deviceID], let seq = record.seq else { continue }
            device.queue.append(QueuedNotification(record: record, committed: true, delivery: .stored))
            device.nextSeq = max(device.nextSeq, seq + 1)
            withQueue.insert(device.id)
        }
        counters.add(queued: records.count)
    }

    // MARK: Devices

    func createDevice(id: String, secretHash: [UInt8], promise: EventLoopPromise<Void>) {
        let record = DeviceRecord(id: id, secretHash: secretHash, createdAt: clock.nowMillis())
        devices[id] = DeviceState(id: id, secretHash: secretHash, ackedSeq: 0, lastSeq: 0)
        commit([.createDevice(record)]) { [self] result in
            if case .failure = result { devices[id] = nil }
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
            promise.succeed(token)
            return
        }
        let token: String
        do {
            token = try Identifiers.newToken(forDevice: deviceID)
        } catch {
            promise.fail(Refusal(status: 500, reason: "InternalServerError", detail: "\(error)"))
            return
        }
        let record = RegistrationRecord(token: token, deviceID: deviceID, topic: topic, createdAt: clock.nowMillis())
        registrations[token] = RegistrationState(deviceID: deviceID, topic: topic)
        device.tokensByTopic[topic] = token
        commit([.register(record)]) { [self] result in
            switch result {
            case .success:
                promise.succeed(token)
            case .failure(let error):
                registrations[token] = nil
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
                Refusal(status: 404, reason: "NotFound", detail: "no active registration \(token) on this device")
            )
            return
        }
        let now = clock.nowMillis()
        registration.unregisteredAt = now
        registrations[token] = registration
        device.tokensByTopic[registration.topic] = nil
        // Undelivered pushes for the app are dropped with it; delivered ones wait for their ack.
        let dropped = removeUndelivered(from: device) { $0.record.token == token }
        counters.recordDrop(.unregistered, count: dropped.count)
        counters.add(queued: -dropped.count)
        if device.queue.isEmpty { withQueue.remove(device.id) }
        var commands: [StoreCommand] = [.unregister(token: token, at: now)]
        if !dropped.isEmpty { commands.append(.remove(acceptanceIDs: dropped)) }
        commit(commands) { result in
            promise.completeWith(result.mapError { Refusal.storeFailed($0) as any Error })
        }
    }

    func deleteDevice(deviceID: String, secret: String, promise: EventLoopPromise<Void>) {
        guard let device = authenticate(deviceID: deviceID, secret: secret) else {
            promise.fail(Refusal.unauthorized)
            return
        }
        let now = clock.nowMillis()
        for token in device.tokensByTopic.values { registrations[token]?.unregisteredAt = now }
        if let stream = device.stream {
            if let writer = stream.writer { finish(writer) }
            counters.connected(-1)
        }
        counters.add(queued: -device.queue.count)
        devices[deviceID] = nil
        online[deviceID] = nil
        withQueue.remove(deviceID)
        commit([.deleteDevice(id: deviceID, at: now)]) { result in
            promise.completeWith(result.mapError { Refusal.storeFailed($0) as any Error })
        }
    }

    // MARK: Provider pushes

    func accept(_ push: ValidatedPush, promise: EventLoopPromise<Disposition>) {
        guard let registration = registrations[push.deviceToken] else {
            promise.fail(Refusal(status: 400, reason: "BadDeviceToken", detail: "no device has the token \(push.deviceToken)"))
            return
        }
        // Checked before the device: a deleted device's tokens are unregistered, not unknown.
        if let at = registration.unregisteredAt {
            promise.fail(
                Refusal(
                    status: 410,
                    reason: "Unregistered",
                    detail: "the token was unregistered; stop sending to it",
                    timestamp: at
                )
            )
            return
        }
        guard let device = devices[registration.deviceID] else {
            promise.fail(Refusal(status: 400, reason: "BadDeviceToken", detail: "no device has the token \(push.deviceToken)"))
            return
        }
        guard registration.topic == push.topic else {
            promise.fail(
                Refusal(
                    status: 400,
                    reason: "DeviceTokenNotForTopic",
                    detail: "the token is registered for \(registration.topic), not \(push.topic)"
                )
            )
            return
        }
        let now = clock.nowMillis()
        let connected = device.stream != nil
        let expiresAt: Int64
        switch push.expiration {
        case .defaultLifetime: expiresAt = now + configuration.defaultLifetimeMillis
        case .immediately:
            guard connected else {
                counters.recordDisposition(.discarded)
                promise.succeed(.discarded)
                return
            }
            expiresAt = now + configuration.immediateGraceMillis
        case .at(let seconds):
            expiresAt = seconds.multipliedReportingOverflow(by: 1000).overflow ? .max : seconds * 1000
            if expiresAt <= now {
                counters.recordDisposition(.discarded)
                promise.succeed(.discarded)
                return
            }
        }
        guard device.queue.count < configuration.maxQueuedPerDevice else {
            promise.fail(
                Refusal(
                    status: 429,
                    reason: "TooManyRequests",
                    detail: "\(device.queue.count) notifications are already waiting for this device; retry later"
                )
            )
            return
        }
        let seq = device.nextSeq
        device.nextSeq += 1
        let record = NotificationRecord(
            acceptanceID: nextAcceptanceID(),
            deviceID: device.id,
            token: push.deviceToken,
            topic: push.topic,
            apnsID: push.apnsID,
            pushType: push.pushType.rawValue,
            priority: push.priority.rawValue,
            collapseID: push.collapseID,
            payload: Array(push.payload.readableBytesView),
            acceptedAt: now,
            expiresAt: expiresAt,
            seq: seq
        )
        device.queue.append(QueuedNotification(record: record, committed: false, delivery: connected ? .immediate : .stored))
        withQueue.insert(device.id)
        counters.add(queued: 1)
        let disposition: Disposition = connected ? .delivered : .stored
        commit([.enqueue(record)]) { [self] result in
            committed(deviceID: device.id, seq: seq, result: result)
            switch result {
            case .success:
                counters.recordDisposition(disposition)
                promise.succeed(disposition)
            case .failure(let error):
                promise.fail(
                    Refusal(
                        status: error.kind == .overloaded ? 503 : 500,
                        reason: error.kind == .overloaded ? "ServiceUnavailable" : "InternalServerError",
                        detail: "the notification could not be stored: \(error); retry"
                    )
                )
            }
        }
    }

    private func committed(deviceID: String, seq: UInt64, result: Result<Void, StoreError>) {
        guard let device = devices[deviceID],
              let index = device.queue.lastIndex(where: { $0.seq == seq })
        else { return }
        switch result {
        case .success:
            device.queue[index].committed = true
            pump(device)
        case .failure:
            device.queue.remove(at: index)
            counters.add(queued: -1)
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
        device.stream = StreamBinding(generation: streamGenerations, now: clock.nowMillis())
        device.resetStreamProgress()
        online[deviceID] = device
        if let lastEventID { acknowledge(device, upTo: lastEventID, promise: nil) }
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
        acknowledge(device, upTo: upTo, promise: promise)
    }

    /// Cumulative ack. Only committed notifications can have been seen, so removal stops at the
    /// first uncommitted one; an ack beyond anything assigned is clamped.
    private func acknowledge(_ device: DeviceState, upTo requested: UInt64, promise: EventLoopPromise<Void>?) {
        let upTo = min(requested, device.nextSeq - 1)
        guard upTo > device.ackedSeq else {
            promise?.succeed()
            return
        }
        var removed = 0
        while let first = device.queue.first, first.committed, first.seq <= upTo {
            device.queue.removeFirst()
            removed += 1
            if device.deliveredCount > 0 {
                device.deliveredCount -= 1
                device.unackedBytes -= first.eventSize
            }
        }
        counters.add(queued: -removed)
        counters.acknowledged(removed)
        if device.queue.isEmpty { withQueue.remove(device.id) }
        device.ackedSeq = upTo
        commit([.ack(deviceID: device.id, upTo: upTo)]) { result in
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
            if entry.record.expiresAt <= now {
                device.queue.remove(at: device.queue.index(device.queue.startIndex, offsetBy: device.deliveredCount))
                expired.append(entry.record.acceptanceID)
                continue
            }
            guard device.unackedBytes < configuration.unackedWindowBytes else { break }
            if buffer == nil { buffer = ByteBuffer() }
            let before = buffer!.writerIndex
            EventStreamEncoder.writeNotification(entry.record, delivery: entry.delivery, into: &buffer!)
            let size = buffer!.writerIndex - before
            let index = device.queue.index(device.queue.startIndex, offsetBy: device.deliveredCount)
            device.queue[index].eventSize = size
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
        if device.queue.isEmpty { withQueue.remove(device.id) }
        commit([.remove(acceptanceIDs: ids)]) { _ in }
    }

    /// Removes entries not yet written on the current stream that match; returns their ids.
    private func removeUndelivered(from device: DeviceState, where matches: (QueuedNotification) -> Bool) -> [UInt64] {
        var kept = CircularBuffer<QueuedNotification>(initialCapacity: device.queue.count)
        var removed: [UInt64] = []
        for (offset, entry) in device.queue.enumerated() {
            if offset >= device.deliveredCount, matches(entry) {
                removed.append(entry.record.acceptanceID)
            } else {
                kept.append(entry)
            }
        }
        if !removed.isEmpty { device.queue = kept }
        return removed
    }

    // MARK: Plumbing

    /// Commits, then runs `then` back on this shard's loop. A failure is logged here once; the
    /// caller undoes its in-memory change and answers the request.
    private func commit(_ commands: [StoreCommand], then: @escaping (Result<Void, StoreError>) -> Void) {
        let loop = eventLoop
        let continuation = NIOLoopBound(then, eventLoop: loop)
        let logger = self.logger
        store.commit(commands) { result in
            if case .failure(let error) = result {
                logger.error("store commit failed", metadata: ["error": "\(error)", "store.commands": "\(commands.count)"])
            }
            loop.execute { continuation.value(result) }
        }
    }

    private func write(_ buffer: ByteBuffer, to writer: ResponseBodyWriter) {
        writer.eventLoop.execute {
            // The unacked window keeps the stream's queue under its high watermark; if it is full
            // anyway, the stream is reset so that the agent reconnects and gets everything again.
            if writer.write(buffer) == .full { writer.cancel() }
        }
    }

    private func finish(_ writer: ResponseBodyWriter) {
        writer.eventLoop.execute { writer.finish() }
    }
}
