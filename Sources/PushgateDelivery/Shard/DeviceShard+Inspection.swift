import NIOCore
import PushgateModel
import PushgateScheduler
import PushgateStore

// Read-only views of the shard for the metrics and the admin API, computed from its state when
// asked. Each costs a walk over what it reports (never the whole population for the gauges:
// devices with queued notifications, and the held pushes only when the oldest is asked for).
extension DeviceShard {
    func statistics(includeOldestHeld: Bool) -> DeliveryStatistics {
        var statistics = DeliveryStatistics()
        statistics.devices = devices.count
        statistics.connectedDevices = online.count
        statistics.held = held.count
        for deviceID in withQueue {
            guard let device = devices[deviceID] else { continue }
            statistics.unacked += device.deliveredCount
            statistics.stored += device.queue.count - device.deliveredCount
        }
        if includeOldestHeld {
            for record in held.values {
                statistics.oldestHeldAcceptedAt = min(statistics.oldestHeldAcceptedAt ?? record.acceptedAt, record.acceptedAt)
                if record.push.priority == .normal, record.push.pushType.pushClass == .regular {
                    statistics.oldestDeferredAcceptedAt = min(statistics.oldestDeferredAcceptedAt ?? record.acceptedAt, record.acceptedAt)
                }
            }
        }
        return statistics
    }

    /// Per topic and the devices holding the most, each list capped, most held first.
    func overview(topicLimit: Int, deviceLimit: Int) -> DeliveryOverview {
        var topics: [String: DeliveryOverview.Topic] = [:]
        for registration in registrations.values where registration.unregisteredAt == nil {
            topics[registration.topic, default: .init(topic: registration.topic)].registrations += 1
        }
        var heldByDevice: [String: (count: Int, oldest: Int64)] = [:]
        for record in held.values {
            topics[record.push.topic, default: .init(topic: record.push.topic)].held += 1
            let current = heldByDevice[record.deviceID] ?? (0, .max)
            heldByDevice[record.deviceID] = (current.count + 1, min(current.oldest, record.acceptedAt))
        }
        for deviceID in withQueue {
            guard let device = devices[deviceID] else { continue }
            for (index, entry) in device.queue.enumerated() {
                if index < device.deliveredCount {
                    topics[entry.record.push.topic, default: .init(topic: entry.record.push.topic)].unacked += 1
                } else {
                    topics[entry.record.push.topic, default: .init(topic: entry.record.push.topic)].stored += 1
                }
            }
        }
        var overview = DeliveryOverview()
        let sortedTopics = topics.values.sorted { ($0.held, $0.stored, $1.topic) > ($1.held, $1.stored, $0.topic) }
        overview.topics = Array(sortedTopics.prefix(topicLimit))
        overview.topicsTruncated = sortedTopics.count > topicLimit
        let sortedDevices = heldByDevice
            .map { DeliveryOverview.HeldDevice(deviceID: $0.key, held: $0.value.count, oldestHeldAcceptedAt: $0.value.oldest) }
            .sorted { ($0.held, $1.oldestHeldAcceptedAt, $1.deviceID) > ($1.held, $0.oldestHeldAcceptedAt, $0.deviceID) }
        overview.topHeldDevices = Array(sortedDevices.prefix(deviceLimit))
        overview.heldDevicesTruncated = sortedDevices.count > deviceLimit
        return overview
    }

    /// The device and why each of its notifications waits; nil for an unknown device.
    func inspect(deviceID: String) -> DeviceInspection? {
        guard let device = devices[deviceID] else { return nil }
        let now = clock.nowMillis()
        let connected = device.stream != nil
        let power = scheduler.power(device.handle) ?? .awake
        let global = configuration.scheduler.global
        let deviceBucket = bucket(
            scheduler.bucket(device: device.handle, now: now),
            capacity: global.deviceBurst,
            refillPerHour: global.deviceRefillPerHour,
            now: now
        )
        var registrationViews: [DeviceInspection.Registration] = []
        var waiting: [DeviceInspection.Waiting] = []
        for (topic, token) in device.tokensByTopic.sorted(by: { $0.key < $1.key }) {
            guard let app = registrations[token]?.app, let policy = scheduler.policy(of: app) else { continue }
            let appBucket = bucket(scheduler.bucket(app: app, now: now), capacity: policy.appBurst, refillPerHour: policy.appRefillPerHour, now: now)
            registrationViews.append(
                .init(token: token, topic: topic, appState: scheduler.appState(app) ?? .background, bucket: appBucket)
            )
            for push in scheduler.heldPushes(app: app) ?? [] {
                guard let record = held[push.id] else { continue }
                let reason: DeviceInspection.WaitReason
                if !connected {
                    reason = .offline(since: device.offlineSince)
                } else if push.pushClass == .regular {
                    reason = push.deferredUntil.map { .deferred(until: $0) } ?? .waitsForWake
                } else if power == .lowPower {
                    reason = .lowPower
                } else if push.ahead > 0 {
                    reason = .behindOlderSilent(count: push.ahead)
                } else if appBucket.tokens < 1 {
                    reason = .appBudgetEmpty(until: scheduler.nextToken(app: app, now: now) ?? now)
                } else if deviceBucket.tokens < 1 {
                    reason = .deviceBudgetEmpty(until: scheduler.nextToken(device: device.handle, now: now) ?? now)
                } else {
                    reason = .releaseDue
                }
                waiting.append(.init(notification: record, state: .held, reason: reason))
            }
        }
        for (index, entry) in device.queue.enumerated() {
            if index < device.deliveredCount || entry.sentInKeepalive {
                waiting.append(.init(notification: entry.record, state: .unacked, reason: .awaitingAck(inKeepaliveResponse: entry.sentInKeepalive)))
            } else if !connected {
                waiting.append(.init(notification: entry.record, state: .stored, reason: .offline(since: device.offlineSince)))
            } else {
                waiting.append(.init(notification: entry.record, state: .stored, reason: .behindUnackedWindow(unackedBytes: device.unackedBytes)))
            }
        }
        waiting.sort { $0.notification.acceptanceID < $1.notification.acceptanceID }
        return DeviceInspection(
            deviceID: device.id,
            connected: connected,
            offlineSince: device.offlineSince,
            power: power,
            bucket: deviceBucket,
            registrations: registrationViews,
            notifications: waiting,
            unackedBytes: device.unackedBytes
        )
    }

    private func bucket(_ snapshot: BucketSnapshot?, capacity: Int, refillPerHour: Int, now: Int64) -> DeviceInspection.Bucket {
        let unit = Int64(BucketSnapshot.unitsPerToken)
        let level = Int64(snapshot?.level ?? 0)
        let nextWhole = (level / unit + 1) * unit
        var nextTokenAt: Int64?
        if nextWhole <= Int64(capacity) * unit, refillPerHour > 0 {
            // Units refill at `refillPerHour` per millisecond.
            nextTokenAt = now + (nextWhole - level + Int64(refillPerHour) - 1) / Int64(refillPerHour)
        }
        return DeviceInspection.Bucket(
            tokens: Double(level) / Double(unit),
            capacity: capacity,
            refillPerHour: refillPerHour,
            nextTokenAt: nextTokenAt
        )
    }
}
