import PushgateModel
import PushgateScheduler
import PushgateStore

// Devices and registrations: creation and removal, as plans.
extension ShardState {
    func createDevice(id: String, secretHash: [UInt8]) -> ShardPlan {
        let now = clock.nowMillis()
        let handle = scheduler.addDevice(now: now)
        deviceIDs[handle] = id
        devices[id] = DeviceState(id: id, secretHash: secretHash, handle: handle, lastSeq: 0, offlineSince: now)
        return ShardPlan(
            commands: [.createDevice(DeviceRecord(id: id, secretHash: secretHash, createdAt: now))],
            restorations: [.createdDevice(id: id, handle: handle)]
        )
    }

    /// A new registration of `topic` on the device (an APNs app, or a Web Push subscription of
    /// that name, restricted to `applicationServerKey` when given), with its new token; the
    /// caller has checked that the topic is not registered yet and that the device has room.
    func register(
        _ topic: String,
        token: String,
        on device: DeviceState,
        kind: RegistrationKind = .apns,
        applicationServerKey: [UInt8]? = nil
    ) -> ShardPlan {
        let topic = interned(topic)
        let record = RegistrationRecord(
            token: token,
            deviceID: device.id,
            topic: topic,
            createdAt: clock.nowMillis(),
            kind: kind,
            applicationServerKey: applicationServerKey
        )
        let app = scheduler.addApp(device: device.handle, topic: topic)
        if let app { appTokens[app] = token }
        registrations[token] = RegistrationState(
            deviceID: device.id,
            topic: topic,
            kind: kind,
            applicationServerKey: applicationServerKey,
            app: app
        )
        device.tokensByTopic[topic] = token
        return ShardPlan(
            commands: [.register(record)],
            restorations: [.registered(token: token, deviceID: device.id, topic: topic, app: app)]
        )
    }

    /// Ends an active registration of the device: providers get 410 from now on, its undelivered
    /// pushes are dropped (delivered ones wait for their ack), its held ones too. Stays undone
    /// in memory if the commit fails: the token must not take pushes again.
    func unregister(_ token: String, _ registration: RegistrationState, of device: DeviceState) -> ShardPlan {
        let now = clock.nowMillis()
        var registration = registration
        registration.unregisteredAt = now
        tombstones.append((now, token))
        device.tokensByTopic[registration.topic] = nil
        var plan = ShardPlan(commands: [.unregister(token: token, at: now)])
        dropQueued(takeUndelivered(from: device) { $0.record.push.deviceToken == token }, .unregistered, into: &plan)
        queueShrank(device)
        if let app = registration.app {
            dropHeld(scheduler.removeApp(app), into: &plan)
            appTokens[app] = nil
            registration.app = nil
        }
        registrations[token] = registration
        return plan
    }

    /// Removes the device and everything queued or held for it; its tokens stay, unregistered,
    /// so that providers get 410. Like unregistering, not undone if the commit fails.
    func deleteDevice(_ device: DeviceState) -> ShardPlan {
        let now = clock.nowMillis()
        for token in device.tokensByTopic.values {
            registrations[token]?.unregisteredAt = now
            tombstones.append((now, token))
            if let app = registrations[token]?.app { appTokens[app] = nil }
            registrations[token]?.app = nil
        }
        setStream(nil, of: device)
        // The device leaves `devices` here, so its fence is given now, not by `seal`.
        var plan = ShardPlan()
        if let owner = device.owner {
            plan.commands.append(.fence(deviceID: device.id, lease: owner.lease, epoch: owner.epoch))
        }
        let dropped = takeHeld(scheduler.removeDevice(device.handle), into: &plan)
        deviceIDs[device.handle] = nil
        // Dropped undelivered: one sent (on a stream or in a keep-alive's response) reached the
        // device and only its ack is missing.
        counters.recordDrop(.unregistered, count: device.queue.count { !$0.sent })
        for entry in device.queue { leftMemory(entry.record) }
        devices[device.id] = nil
        withQueue[device.id] = nil
        // Every notification of the device goes in the one command, held ones included.
        let acceptanceIDs = device.queue.map(\.record.acceptanceID) + dropped.map(\.acceptanceID)
        plan.commands.append(.deleteDevice(id: device.id, at: now, acceptanceIDs: acceptanceIDs))
        return plan
    }
}
