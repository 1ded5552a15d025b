import PushgateModel
import PushgateScheduler

/// Limits and timings of the delivery core.
public struct DeliveryConfiguration: Sendable {
    /// The scheduler's policy at start, globally and per topic (`DeliveryCore.reconfigure`
    /// replaces it on every shard); its `defaultExpirationMillis` is the lifetime of a push sent
    /// without `apns-expiration` (APNs stores for 30 days).
    public var scheduler = SchedulerConfiguration()
    /// A push with `apns-expiration: 0` for a connected device: how long it may take to be
    /// written before it counts as expired (it is never stored for an offline device).
    public var immediateGraceMillis: Int64 = 10_000
    /// Bytes of events written to a device's stream and not yet acknowledged; more waits in the
    /// queue until the agent acks. This bounds what a stalled agent costs.
    public var unackedWindowBytes = 256 * 1024
    /// The longest a device's stream stays silent: a stream that has written nothing for
    /// `heartbeatIntervalMillis - heartbeatTickMillis` gets a heartbeat comment at the first tick
    /// that finds it so. Proxies with a longer idle timeout then keep the connection, and an
    /// agent can take a longer silence as a dead connection. Every heartbeat is a write to a
    /// socket: it is what an idle device costs the gateway.
    public var heartbeatIntervalMillis: Int64 = 30_000
    /// How often each shard looks for silent streams; also how much sooner than
    /// `heartbeatIntervalMillis` a heartbeat may come.
    public var heartbeatTickMillis: Int64 = 1_000

    /// How long a stream may be silent at one tick without being silent for the whole interval by
    /// the next.
    var heartbeatLeadMillis: Int64 { max(0, heartbeatIntervalMillis - heartbeatTickMillis) }
    /// How often expired notifications are swept out of the queues.
    public var expirySweepIntervalMillis: Int64 = 60_000
    /// Most notifications waiting for one device (queued, unacknowledged and held, all apps
    /// together); more are refused with 429 TooManyRequests.
    public var maxQueuedPerDevice = 10_000
    /// Most notifications queued or unacknowledged for one app on a device, so that one
    /// provider cannot fill `maxQueuedPerDevice` and get every other app's pushes to the device
    /// refused (APNs keeps one per app for an offline device). Held silent pushes have their
    /// own limit (the scheduler's `maxHeldPerApp`).
    public var maxQueuedPerApp = 5_000
    /// Active registrations (apps) on one device: each costs a scheduler entry and memory, and a
    /// client registering thousands of made-up topics on its device must not make the gateway
    /// hold them all.
    public var maxRegistrationsPerDevice = 256
    /// How long an unregistered token is remembered, so that providers get 410 Unregistered (with
    /// its time) and learn to stop; after it, the token is unknown (400 BadDeviceToken) and its
    /// row leaves the store.
    public var unregisteredRetentionMillis: Int64 = 30 * 24 * 3600 * 1000
    /// The latest `apns-expiration` honoured: a later one (up to year 292 billion is valid) is
    /// cut to this long after acceptance, so that a stored push leaves the disk in the end even
    /// if no agent ever acknowledges it. APNs, too, stores for a limited time.
    public var maxExpirationMillis: Int64 = 30 * 24 * 3600 * 1000
    /// Bytes all notifications waiting for their devices may take in memory, all shards
    /// together (`QueuedNotificationBudget`: payload plus overhead each); past it pushes are
    /// refused with 429 TooManyRequests.
    public var queuedNotificationBudgetBytes = 1 << 30

    public init() {}
}

extension SchedulerConfiguration {
    /// How long the app of a silent push has to report its fetch result (its topic's
    /// `fetchWindowMillis`, in seconds); nil for other pushes.
    func fetchWindowSeconds(of record: AcceptedPush) -> Int? {
        guard record.push.pushClass == .silent else { return nil }
        return Int(policy(forTopic: record.push.topic).fetchWindowMillis / 1000)
    }
}
