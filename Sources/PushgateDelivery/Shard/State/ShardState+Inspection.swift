import NIOCore
import PushgateModel
import PushgateScheduler
import PushgateStore

// Read-only views of the shard for the metrics and the admin API, computed from its state when
// asked. Each costs a walk over what it reports (never the whole population for the gauges:
// devices with queued notifications, and the held pushes only when the oldest is asked for).
extension ShardState {
    func statistics(includeOldestHeld: Bool) -> DeliveryStatistics {
        var statistics = DeliveryStatistics()
        statistics.devices = devices.count
        statistics.connectedDevices = connectedDevices
        statistics.held = held.count
        for device in withQueue.values {
            statistics.unacked += device.deliveredCount
            statistics.stored += device.queue.count - device.deliveredCount
        }
        if includeOldestHeld {
            // Acceptance ids follow acceptance: the oldest held push has the smallest, found
            // among the keys alone (a walk over the records would copy each one).
            statistics.oldestHeldAcceptedAt = held.keys.min().flatMap { held[$0]?.acceptedAt }
            statistics.oldestDeferredAcceptedAt = scheduler.oldestDeferredAcceptedAt()
            statistics.refillScaled = scheduler.scaledRefillCount(now: clock.nowMillis())
        }
        return statistics
    }

    /// Per topic and the devices holding the most, each list capped, most held first. One pass
    /// over registrations, held pushes and queues that reads only each one's topic (a record is
    /// not copied), and one over the devices' held counts; the oldest held push is looked up for
    /// the listed devices only.
    func overview(topicLimit: Int, deviceLimit: Int) -> DeliveryOverview {
        var topics = TopicTally()
        for registration in registrations.values where registration.unregisteredAt == nil {
            topics.count(registration.topic, .registrations)
        }
        for index in held.values.indices {
            topics.count(held.values[index].push.topic, .held)
        }
        for device in withQueue.values {
            var position = 0
            for entry in device.queue {
                topics.count(entry.record.push.topic, position < device.deliveredCount ? .unacked : .stored)
                position += 1
            }
        }
        var overview = DeliveryOverview()
        let sortedTopics = topics.all.sorted { ($0.held, $0.stored, $1.topic) > ($1.held, $1.stored, $0.topic) }
        overview.topics = Array(sortedTopics.prefix(topicLimit))
        overview.topicsTruncated = sortedTopics.count > topicLimit

        // Most held first; among equals, by device id. A selection of the first `deviceLimit`,
        // not a sort: with 100,000 devices holding one push each, sorting them all cost the event
        // loop most of a 100 ms stall.
        var leaders: [DeviceState] = []
        var holding = 0
        for device in devices.values where device.heldCount > 0 {
            holding += 1
            guard deviceLimit > 0 else { continue }
            if leaders.count == deviceLimit {
                guard let last = leaders.last, Self.ranksBefore(device, last) else { continue }
                leaders.removeLast()
            }
            let position = leaders.firstIndex { Self.ranksBefore(device, $0) } ?? leaders.endIndex
            leaders.insert(device, at: position)
        }
        overview.topHeldDevices = leaders.map { device in
            DeliveryOverview.HeldDevice(
                deviceID: device.id,
                held: device.heldCount,
                oldestHeldAcceptedAt: oldestHeld(of: device) ?? 0
            )
        }
        overview.heldDevicesTruncated = holding > deviceLimit
        return overview
    }

    private static func ranksBefore(_ device: DeviceState, _ other: DeviceState) -> Bool {
        device.heldCount != other.heldCount ? device.heldCount > other.heldCount : device.id < other.id
    }

    /// The acceptance time of the device's oldest held push: the first held of each of its apps.
    private func oldestHeld(of device: DeviceState) -> Int64? {
        var oldest: Int64?
        for token in device.tokensByTopic.values {
            guard let app = registrations[token]?.app, let first = scheduler.heldPushes(app: app)?.map(\.id).min(),
                let acceptedAt = held[first]?.acceptedAt
            else { continue }
            oldest = min(oldest ?? acceptedAt, acceptedAt)
        }
        return oldest
    }

    /// The device and why each of its notifications waits; nil for an unknown device.
    func inspect(deviceID: String) -> DeviceInspection? {
        guard let device = devices[deviceID] else { return nil }
        let now = clock.nowMillis()
        let connected = device.stream != nil
        let power = scheduler.power(device.handle) ?? .awake
        let global = scheduler.configuration.global
        let deviceBucket = bucket(
            scheduler.bucket(device: device.handle, now: now),
            capacity: global.deviceBurst,
            refillPerHour: Double(global.deviceRefillPerHour),
            nextTokenAt: scheduler.nextToken(device: device.handle, now: now) ?? now
        )
        let windows = scheduler.openFetchWindows(device: device.handle)
        var registrationViews: [DeviceInspection.Registration] = []
        var waiting: [DeviceInspection.Waiting] = []
        for (topic, token) in device.tokensByTopic.sorted(by: { $0.key < $1.key }) {
            guard let app = registrations[token]?.app, let policy = scheduler.policy(of: app),
                let figures = scheduler.fetchFigures(app: app, now: now)
            else { continue }
            let appBucket = bucket(
                scheduler.bucket(app: app, now: now),
                capacity: policy.appBurst,
                refillPerHour: Double(figures.effectiveRefillMilliPerHour) / 1000,
                nextTokenAt: scheduler.nextToken(app: app, now: now) ?? now
            )
            let fetch = DeviceInspection.Fetch(
                score: Double(figures.snapshot.history.score) / 1000,
                results: figures.snapshot.history.results,
                configuredRefillPerHour: policy.appRefillPerHour,
                minRefillPerHour: min(policy.minRefillPerHour, policy.appRefillPerHour),
                penaltyUntil: figures.snapshot.penaltyUntil,
                interval: figures.snapshot.interval,
                intervalReadyAt: figures.intervalReadyAt,
                openWindows: windows.filter { $0.app == app }.map { ($0.seq, $0.until) }
            )
            registrationViews.append(
                .init(
                    token: token,
                    topic: topic,
                    kind: registrations[token]?.kind ?? .apns,
                    appState: scheduler.appState(app) ?? .background,
                    bucket: appBucket,
                    fetch: fetch
                )
            )
            for push in scheduler.heldPushes(app: app) ?? [] {
                guard let record = held[push.id] else { continue }
                let reason: DeviceInspection.WaitReason
                if push.waitsForPowerState, let urgency = push.urgency {
                    reason = .belowUrgency(urgency, power: power)
                } else if !connected {
                    reason = .offline(since: device.offlineSince)
                } else if !push.waitsForBudget {
                    reason = push.deferredUntil.map { .deferred(until: $0) } ?? .waitsForWake
                } else if power == .lowPower {
                    reason = .lowPower
                } else if push.ahead > 0 {
                    reason = .behindOlderSilent(count: push.ahead)
                } else if case .never = fetch.interval {
                    reason = .fetchIntervalNever
                } else if case .seconds(let seconds) = fetch.interval, let ready = fetch.intervalReadyAt {
                    reason = .fetchInterval(seconds: seconds, until: ready)
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
                waiting.append(
                    .init(
                        notification: entry.record,
                        state: .unacked,
                        reason: .awaitingAck(inKeepaliveResponse: entry.sentInKeepalive)
                    )
                )
            } else if !connected {
                waiting.append(
                    .init(notification: entry.record, state: .stored, reason: .offline(since: device.offlineSince))
                )
            } else {
                waiting.append(
                    .init(
                        notification: entry.record,
                        state: .stored,
                        reason: .behindUnackedWindow(unackedBytes: device.unackedBytes)
                    )
                )
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

    /// `nextTokenAt`: when the bucket next holds a whole token (now when it does); the bucket's
    /// next token is shown only while it is not full, and then it is the next whole token above
    /// the level, which is the scheduler's answer only when the level is below one.
    private func bucket(
        _ snapshot: BucketSnapshot?,
        capacity: Int,
        refillPerHour: Double,
        nextTokenAt: Int64
    ) -> DeviceInspection.Bucket {
        let unit = Int64(BucketSnapshot.unitsPerToken)
        let level = Int64(snapshot?.level ?? 0)
        let nextWhole = (level / unit + 1) * unit
        var next: Int64?
        if nextWhole <= Int64(capacity) * unit, refillPerHour > 0, let at = snapshot?.at {
            // A refill of r tokens an hour adds r units a millisecond.
            next = level < unit ? nextTokenAt : at + Int64((Double(nextWhole - level) / refillPerHour).rounded(.up))
        }
        return DeviceInspection.Bucket(
            tokens: Double(level) / Double(unit),
            capacity: capacity,
            refillPerHour: refillPerHour,
            nextTokenAt: next
        )
    }
}

/// Counts by topic for the overview. Consecutive items mostly share a topic (one app's pushes,
/// one big app's registrations): runs are counted locally and added once, so most items cost a
/// string comparison, not a hash. (The field is an enum: comparing key paths costs a `memcmp` of
/// their patterns, which was most of the overview's time.)
private struct TopicTally {
    enum Field { case registrations, held, stored, unacked }

    private var topics: [String: DeliveryOverview.Topic] = [:]
    private var current: String?
    private var field = Field.held
    private var run = 0

    mutating func count(_ topic: String, _ field: Field) {
        if field == self.field, topic == current {
            run += 1
            return
        }
        flush()
        current = topic
        self.field = field
        run = 1
    }

    private mutating func flush() {
        guard let current, run > 0 else { return }
        var tally = topics[current] ?? .init(topic: current)
        switch field {
        case .registrations: tally.registrations += run
        case .held: tally.held += run
        case .stored: tally.stored += run
        case .unacked: tally.unacked += run
        }
        topics[current] = tally
        run = 0
    }

    var all: [DeliveryOverview.Topic] {
        mutating get {
            flush()
            return Array(topics.values)
        }
    }
}
