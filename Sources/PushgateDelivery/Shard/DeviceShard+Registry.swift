import NIOCore
import PushgateCrypto
import PushgateModel
import PushgateScheduler
import PushgateStore

// Devices and registrations: creation, the secret check, removal.
extension DeviceShard {
    func createDevice(id: String, secretHash: [UInt8], promise: EventLoopPromise<Void>) {
        let now = clock.nowMillis()
        let record = DeviceRecord(id: id, secretHash: secretHash, createdAt: now)
        let handle = scheduler.addDevice(now: now)
        deviceIDs[handle] = id
        devices[id] = DeviceState(id: id, secretHash: secretHash, handle: handle, lastSeq: 0, offlineSince: now)
        commit([.createDevice(record)]) { [self] result in
            switch result {
            case .success:
                logDevice("device created", id)
            case .failure:
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
        guard device.tokensByTopic.count < configuration.maxRegistrationsPerDevice else {
            promise.fail(
                Refusal(
                    .tooManyRegistrations,
                    "the device has \(device.tokensByTopic.count) registrations, the most it may have (maxRegistrationsPerDevice); unregister an app before registering another"
                )
            )
            return
        }
        let token: String
        do {
            token = try Identifiers.newToken(forDevice: deviceID)
        } catch {
            promise.fail(Refusal(.internalServerError, "\(error)"))
            return
        }
        let topic = interned(topic)
        let record = RegistrationRecord(token: token, deviceID: deviceID, topic: topic, createdAt: clock.nowMillis())
        let app = scheduler.addApp(device: device.handle, topic: topic)
        if let app { appTokens[app] = token }
        registrations[token] = RegistrationState(
            deviceID: deviceID,
            topic: topic,
            app: app,
            committing: promise.futureResult
        )
        device.tokensByTopic[topic] = token
        commit([.register(record)]) { [self] result in
            switch result {
            case .success:
                registrations[token]?.committing = nil
                logDevice("app registered", deviceID, ["topic": "\(topic)"])
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
        tombstones.append((now, token))
        device.tokensByTopic[registration.topic] = nil
        // Undelivered pushes for the app are dropped with it; delivered ones wait for their ack.
        let dropped = removeUndelivered(from: device) { $0.record.push.deviceToken == token }
        dropQueued(dropped, .unregistered)
        queueShrank(device)
        var commands: [StoreCommand] = [.unregister(token: token, at: now)]
        if !dropped.isEmpty { commands.append(.remove(acceptanceIDs: dropped.map(\.acceptanceID))) }
        if let app = registration.app {
            forget(scheduler.removeApp(app), into: &commands)
            appTokens[app] = nil
            registration.app = nil
            registrations[token] = registration
        }
        commit(commands) { [self, topic = registration.topic] result in
            if case .success = result { logDevice("app unregistered", deviceID, ["topic": "\(topic)"]) }
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
            tombstones.append((now, token))
            if let app = registrations[token]?.app { appTokens[app] = nil }
            registrations[token]?.app = nil
        }
        // Ended, and let go: the stream holds its connection, which nothing of a deleted
        // device should keep.
        device.stream?.sink?.finish()
        setStream(nil, of: device)
        // Every notification of the device goes, held ones included.
        let acceptanceIDs =
            device.queue.map(\.record.acceptanceID)
            + forgetHeld(scheduler.removeDevice(device.handle)).map(\.acceptanceID)
        deviceIDs[device.handle] = nil
        // Dropped undelivered: one sent (on a stream or in a keep-alive's response) reached the
        // device and only its ack is missing.
        counters.recordDrop(.unregistered, count: device.queue.count { !$0.sent })
        for entry in device.queue { leftMemory(entry.record) }
        devices[deviceID] = nil
        withQueue[deviceID] = nil
        commit([.deleteDevice(id: deviceID, at: now, acceptanceIDs: acceptanceIDs)]) { [self] result in
            if case .success = result {
                logDevice("device deleted", deviceID, ["notifications.removed": "\(acceptanceIDs.count)"])
            }
            promise.completeWith(result.mapError { Refusal.storeFailed($0) as any Error })
        }
    }
}
