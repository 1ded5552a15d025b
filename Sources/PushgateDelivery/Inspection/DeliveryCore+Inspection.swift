import NIOCore

extension DeliveryCore {
    /// What every shard holds now. `includeOldestHeld` walks the held pushes for the oldest.
    public func statistics(includeOldestHeld: Bool = false) async throws -> DeliveryStatistics {
        var total = DeliveryStatistics()
        for shard in shards {
            total.add(try await shard.submit { $0.state.statistics(includeOldestHeld: includeOldestHeld) }.get())
        }
        return total
    }

    /// Per topic and the devices holding the most, over every shard, each list capped.
    public func overview(topicLimit: Int = 100, deviceLimit: Int = 20) async throws -> DeliveryOverview {
        var topics: [String: DeliveryOverview.Topic] = [:]
        var devices: [DeliveryOverview.HeldDevice] = []
        var devicesTruncated = false
        for shard in shards {
            // Each shard's lists are uncapped for topics (a topic spans shards) and capped for
            // devices (a device lives on one).
            let part = try await shard.submit { $0.state.overview(topicLimit: .max, deviceLimit: deviceLimit) }.get()
            for topic in part.topics {
                var merged = topics[topic.topic] ?? .init(topic: topic.topic)
                merged.registrations += topic.registrations
                merged.held += topic.held
                merged.stored += topic.stored
                merged.unacked += topic.unacked
                topics[topic.topic] = merged
            }
            devices += part.topHeldDevices
            devicesTruncated = devicesTruncated || part.heldDevicesTruncated
        }
        var overview = DeliveryOverview()
        let sortedTopics = topics.values.sorted { ($0.held, $0.stored, $1.topic) > ($1.held, $1.stored, $0.topic) }
        overview.topics = Array(sortedTopics.prefix(topicLimit))
        overview.topicsTruncated = sortedTopics.count > topicLimit
        // The shards' order: a device left out of a shard's list ranks after every one listed.
        devices.sort { ($0.held, $1.deviceID) > ($1.held, $0.deviceID) }
        overview.topHeldDevices = Array(devices.prefix(deviceLimit))
        overview.heldDevicesTruncated = devicesTruncated || devices.count > deviceLimit
        return overview
    }

    /// The device and why each of its notifications waits; nil for an unknown device id.
    public func inspect(deviceID: String) async throws -> DeviceInspection? {
        guard Identifiers.isDeviceID(deviceID), let shard = shard(of: deviceID) else { return nil }
        return try await shard.submit { $0.state.inspect(deviceID: deviceID) }.get()
    }
}
