#if canImport(Glibc)
import Glibc
#endif
import PushgateModel
import PushgateScheduler

/// Milliseconds since the UNIX epoch, from a clock the tests can set.
public protocol DeliveryClock: Sendable {
    func nowMillis() -> Int64
}

public struct SystemClock: DeliveryClock {
    public init() {}

    public func nowMillis() -> Int64 {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return Int64(spec.tv_sec) * 1000 + Int64(spec.tv_nsec) / 1_000_000
    }
}

extension Refusal {
    static func storeFailed(_ error: some Error) -> Refusal {
        Refusal(.serviceUnavailable, "could not persist the change: \(error); retry")
    }
}

/// Limits and timings of the delivery core.
public struct DeliveryConfiguration: Sendable {
    /// The scheduler's policy, globally and per topic; its `defaultExpirationMillis` is the
    /// lifetime of a push sent without `apns-expiration` (APNs stores for 30 days).
    public var scheduler = SchedulerConfiguration()
    /// A push with `apns-expiration: 0` for a connected device: how long it may take to be
    /// written before it counts as expired (it is never stored for an offline device).
    public var immediateGraceMillis: Int64 = 10_000
    /// Bytes of events written to a device's stream and not yet acknowledged; more waits in the
    /// queue until the agent acks. This bounds what a stalled agent costs.
    public var unackedWindowBytes = 256 * 1024
    /// Heartbeat comment on a stream that has been silent this long.
    public var heartbeatIntervalMillis: Int64 = 25_000
    /// How often expired notifications are swept out of the queues.
    public var expirySweepIntervalMillis: Int64 = 60_000
    /// Most notifications queued for one device; more are refused with 429 TooManyRequests.
    public var maxQueuedPerDevice = 10_000

    public init() {}
}
