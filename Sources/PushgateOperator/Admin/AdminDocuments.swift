import Foundation
import PushgateCluster
import PushgateDelivery
import PushgateModel

// The admin API's JSON documents, as openapi.yaml names them. Built from the delivery core's
// structured views; every word an operator reads is chosen here.

/// `AdminStats`.
struct AdminStats: Encodable {
    /// `gateway` alone; `node`, one node of a cluster: every figure is this node's (its devices,
    /// its counts since start), but `durableTotals`, the cluster's when the node started plus
    /// the node's since.
    var scope = "gateway"
    /// The node's name and the live nodes, in a cluster.
    var node: String?
    var nodes: [AdminNode]?
    var startedAt: Int64
    var totals: Totals
    var durableTotals: Totals
    var held: Int
    var stored: Int
    var unacked: Int
    var connectedDevices: Int
    var devices: Int
    var topics: [Topic]
    var topicsTruncated: Bool
    var topHeldDevices: [HeldDevice]
    var truncated: Bool

    struct Topic: Encodable {
        var topic: String
        var registrations: Int
        var held: Int
        var stored: Int
        var unacked: Int
    }

    struct HeldDevice: Encodable {
        var deviceId: String
        var held: Int
        var oldestHeldAt: Int64
    }

    init(
        startedAt: Int64,
        totals: Totals,
        durableTotals: Totals,
        statistics: DeliveryStatistics,
        overview: DeliveryOverview
    ) {
        self.startedAt = startedAt
        self.totals = totals
        self.durableTotals = durableTotals
        held = statistics.held
        stored = statistics.stored
        unacked = statistics.unacked
        connectedDevices = statistics.connectedDevices
        devices = statistics.devices
        topics = overview.topics.map {
            Topic(
                topic: $0.topic,
                registrations: $0.registrations,
                held: $0.held,
                stored: $0.stored,
                unacked: $0.unacked
            )
        }
        topicsTruncated = overview.topicsTruncated
        topHeldDevices = overview.topHeldDevices.map {
            HeldDevice(deviceId: $0.deviceID, held: $0.held, oldestHeldAt: $0.oldestHeldAcceptedAt)
        }
        truncated = overview.heldDevicesTruncated
    }
}

/// `AdminNodes`.
struct AdminNodes: Encodable {
    var nodes: [AdminNode]
}

/// `AdminNode`: a live node of the cluster.
struct AdminNode: Encodable {
    var name: String
    /// Where the other nodes reach it.
    var address: String
    var startedAt: Int64
    var leaseExpiresAt: Int64
    var devicesHeld: Int
    /// The node that answered.
    var this: Bool

    init(_ node: NodeInfo, this: Bool) {
        name = node.name
        address = node.address
        startedAt = node.startedAt
        leaseExpiresAt = node.expiresAt
        devicesHeld = node.devicesHeld
        self.this = this
    }
}

/// `AdminDevice`.
struct AdminDevice: Encodable {
    var deviceId: String
    /// The node that holds the device, in a cluster.
    var owner: String?
    var connected: Bool
    var offlineSince: Int64?
    var power: String
    var bucket: Bucket
    var unackedBytes: Int
    var registrations: [Registration]
    var notifications: [Notification]

    struct Bucket: Encodable {
        var tokens: Double
        var capacity: Int
        var refillPerHour: Double
        var nextTokenAt: Int64?

        init(_ bucket: DeviceInspection.Bucket) {
            // Two decimals: a level is kept in fractions of a token finer than anyone reads.
            tokens = (bucket.tokens * 100).rounded(.down) / 100
            capacity = bucket.capacity
            refillPerHour = (bucket.refillPerHour * 1000).rounded() / 1000
            nextTokenAt = bucket.nextTokenAt
        }

        /// `nextTokenAt` is null, not absent, when the bucket is full.
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(tokens, forKey: .tokens)
            try container.encode(capacity, forKey: .capacity)
            try container.encode(refillPerHour, forKey: .refillPerHour)
            try container.encode(nextTokenAt, forKey: .nextTokenAt)
        }

        private enum CodingKeys: String, CodingKey {
            case tokens, capacity, refillPerHour, nextTokenAt
        }
    }

    struct Registration: Encodable {
        var token: String
        var topic: String
        /// `apns`, or `webpush` for a Web Push subscription (whose topic is its name).
        var kind: String
        var appState: String
        var bucket: Bucket
        var fetch: Fetch
    }

    /// What the app did with its wakes and what that does to its refill (README, "Background
    /// fetch").
    struct Fetch: Encodable {
        var score: Double
        var results: [String]
        var counts: [String: Int]
        var refillPerHour: Double
        var configuredRefillPerHour: Int
        var minRefillPerHour: Int
        var penaltyUntil: Int64?
        var interval: Interval
        var nextReleaseAllowedAt: Int64?
        var openWindows: [Window]
        /// Why the refill is what it is, in words.
        var explanation: String

        struct Window: Encodable {
            var seq: UInt64
            var until: Int64
        }

        /// `"minimum"`, `"never"` or the seconds, as the state route takes it.
        struct Interval: Encodable {
            var value: FetchInterval

            func encode(to encoder: any Encoder) throws {
                var container = encoder.singleValueContainer()
                switch value {
                case .minimum: try container.encode("minimum")
                case .never: try container.encode("never")
                case .seconds(let seconds): try container.encode(seconds)
                }
            }
        }

        init(_ fetch: DeviceInspection.Fetch, refillPerHour: Double, now: Int64) {
            score = (fetch.score * 1000).rounded() / 1000
            results = fetch.results.map(\.rawValue)
            counts = Dictionary(
                uniqueKeysWithValues: FetchResult.allCases.map { result in
                    (result.rawValue, fetch.results.filter { $0 == result }.count)
                }
            )
            self.refillPerHour = (refillPerHour * 1000).rounded() / 1000
            configuredRefillPerHour = fetch.configuredRefillPerHour
            minRefillPerHour = fetch.minRefillPerHour
            penaltyUntil = fetch.penaltyUntil
            interval = Interval(value: fetch.interval)
            // The scheduler's "never" (Int64.max) is null here, as for "now": `interval` says which.
            nextReleaseAllowedAt = fetch.intervalReadyAt == .max ? nil : fetch.intervalReadyAt
            openWindows = fetch.openWindows.map { Window(seq: $0.seq, until: $0.until) }
            explanation = FetchWords.explain(fetch, refillPerHour: refillPerHour, now: now)
        }

        /// Nulls are written, not left out: every field is always there.
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(score, forKey: .score)
            try container.encode(results, forKey: .results)
            try container.encode(counts, forKey: .counts)
            try container.encode(refillPerHour, forKey: .refillPerHour)
            try container.encode(configuredRefillPerHour, forKey: .configuredRefillPerHour)
            try container.encode(minRefillPerHour, forKey: .minRefillPerHour)
            try container.encode(penaltyUntil, forKey: .penaltyUntil)
            try container.encode(interval, forKey: .interval)
            try container.encode(nextReleaseAllowedAt, forKey: .nextReleaseAllowedAt)
            try container.encode(openWindows, forKey: .openWindows)
            try container.encode(explanation, forKey: .explanation)
        }

        private enum CodingKeys: String, CodingKey {
            case score, results, counts, refillPerHour, configuredRefillPerHour, minRefillPerHour, penaltyUntil,
                interval
            case nextReleaseAllowedAt, openWindows, explanation
        }
    }

    struct Notification: Encodable {
        var apnsId: String
        var seq: UInt64?
        var topic: String
        var pushType: String
        var priority: Int
        var acceptedAt: Int64
        var expiresAt: Int64
        var state: String
        var reason: String
        var waitsUntil: Int64?
    }

    init(_ device: DeviceInspection, owner: String?, now: Int64) {
        deviceId = device.deviceID
        self.owner = owner
        connected = device.connected
        offlineSince = device.connected ? nil : device.offlineSince
        power = device.power.rawValue
        bucket = Bucket(device.bucket)
        unackedBytes = device.unackedBytes
        registrations = device.registrations.map {
            Registration(
                token: $0.token,
                topic: $0.topic,
                kind: $0.kind.rawValue,
                appState: $0.appState.rawValue,
                bucket: Bucket($0.bucket),
                fetch: Fetch($0.fetch, refillPerHour: $0.bucket.refillPerHour, now: now)
            )
        }
        notifications = device.notifications.map { waiting in
            let record = waiting.notification
            return Notification(
                apnsId: record.push.apnsID,
                seq: record.seq,
                topic: record.push.topic,
                pushType: record.push.pushType.rawValue,
                priority: Int(record.push.priority.rawValue),
                acceptedAt: record.acceptedAt,
                expiresAt: record.expiresAt,
                state: waiting.state.rawValue,
                reason: WaitWords.describe(waiting.reason, now: now),
                waitsUntil: WaitWords.until(waiting.reason)
            )
        }
    }
}

/// `AdminStatsTick`: one second of the live stream.
struct AdminStatsTick: Encodable {
    var time: Int64
    var totals: Totals
    var droppedByReason: [String: Int]
    var deliveredByKind: [String: Int]
    var budgetExhausted: [String: Int]
    var held: Int
    var stored: Int
    var unacked: Int
    var connectedDevices: Int
    var notableSkipped: Int
}

/// `AdminNotableEvent`.
struct AdminNotableEvent: Encodable {
    var time: Int64
    var kind: String
    var deviceId: String
    var apnsId: String
    var topic: String
    var detail: String

    init(_ event: NotableEvent) {
        time = event.time
        kind = event.kind.rawValue
        deviceId = event.deviceID
        apnsId = event.apnsID
        topic = event.topic
        detail = event.detail
    }
}

enum AdminJSON {
    static func encode(_ value: some Encodable) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // The documents hold only strings, numbers and booleans: encoding cannot fail.
        guard let data = try? encoder.encode(value) else { return "{}" }
        return String(decoding: data, as: UTF8.self)
    }
}
