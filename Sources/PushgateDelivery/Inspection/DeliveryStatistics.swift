/// What the shards hold now, read from their state at the moment of asking (the gauges of the
/// metrics and the admin API), not counted as it changes.
public struct DeliveryStatistics: Sendable, Equatable {
    public var devices = 0
    /// Devices with an open event stream.
    public var connectedDevices = 0
    /// Notifications the scheduler holds.
    public var held = 0
    /// Queued for a device and not yet written to its current stream: it is offline, or the
    /// notifications wait behind its unacked window.
    public var stored = 0
    /// Written to a device's current stream (or in a keep-alive's response) and not yet
    /// acknowledged.
    public var unacked = 0
    /// The acceptance time of the oldest held push; nil when nothing is held (or not asked for).
    public var oldestHeldAcceptedAt: Int64?
    /// The same of the oldest held priority-5 push (regular, not silent): the scheduler
    /// releases those after at most their maximum deferral, so an old one means it did not.
    public var oldestDeferredAcceptedAt: Int64?
    /// Registrations whose silent refill is below the configured one (fetch results, a
    /// penalty); counted with the oldest held (a walk over every registration).
    public var refillScaled = 0

    public init() {}

    mutating func add(_ other: DeliveryStatistics) {
        devices += other.devices
        connectedDevices += other.connectedDevices
        held += other.held
        stored += other.stored
        unacked += other.unacked
        refillScaled += other.refillScaled
        if let time = other.oldestHeldAcceptedAt {
            oldestHeldAcceptedAt = min(oldestHeldAcceptedAt ?? time, time)
        }
        if let time = other.oldestDeferredAcceptedAt {
            oldestDeferredAcceptedAt = min(oldestDeferredAcceptedAt ?? time, time)
        }
    }
}

/// Per topic and per device, for the admin API's overview: capped lists, most held first.
public struct DeliveryOverview: Sendable, Equatable {
    public struct Topic: Sendable, Equatable {
        public var topic: String
        public var registrations = 0
        public var held = 0
        public var stored = 0
        public var unacked = 0
    }

    public struct HeldDevice: Sendable, Equatable {
        public var deviceID: String
        public var held: Int
        public var oldestHeldAcceptedAt: Int64
    }

    public var topics: [Topic] = []
    public var topicsTruncated = false
    public var topHeldDevices: [HeldDevice] = []
    /// More devices hold notifications than `topHeldDevices` lists.
    public var heldDevicesTruncated = false
}

extension DeliveryStatistics {
    /// Stored and unacked: every notification with a seq still in a queue.
    public var queued: Int { stored + unacked }
}
