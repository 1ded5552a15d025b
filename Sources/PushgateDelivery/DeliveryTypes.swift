#if canImport(Glibc)
import Glibc
#endif
import PushgateCore
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

/// What happened to an accepted push (the `pushgate-disposition` header).
public enum Disposition: String, Sendable, CaseIterable {
    /// Committed and written (or about to be) to the device's open event stream.
    case delivered
    /// Committed; the scheduler holds it (silent budget spent, priority 5 on an idle device,
    /// priority 1, or a silent push for an offline device) until a wake event or its budget.
    case held
    /// Committed; the device is offline and gets it when it reconnects.
    case stored
    /// Committed, replacing a held or stored push with the same `apns-collapse-id`.
    case coalesced
    /// Not kept: `apns-expiration` 0 and the device could not take it now, an expiration in the
    /// past, or a silent push for an app the device reported `terminated`.
    case discarded
}

/// How a notification reached the device (the `delivery` field of an event).
public enum DeliveryKind: Sendable, Equatable {
    /// Written while the device was connected when the push was accepted.
    case immediate
    /// Kept while the device was offline and sent when it came back.
    case stored
    /// Held, and sent along with the priority-10 push whose apns-id is `carrier`.
    case piggyback(carrier: String)
    /// Held, and released by the device's keep-alive (in its response).
    case keepalive
    /// Held, and released by the scheduler's own timing: a refilled silent budget, or a
    /// priority-5 push whose maximum deferral ran out.
    case budget
    /// Held, and released when the device came online (its stream opened) or reported `awake`.
    case online

    /// The kinds without their carrier, as counted and as written in events.
    public enum Label: String, Sendable, CaseIterable {
        case immediate, stored, piggyback, keepalive, budget, online
    }

    public var label: Label {
        switch self {
        case .immediate: .immediate
        case .stored: .stored
        case .piggyback: .piggyback
        case .keepalive: .keepalive
        case .budget: .budget
        case .online: .online
        }
    }

    var carrier: String? {
        if case .piggyback(let carrier) = self { return carrier }
        return nil
    }
}

extension Refusal {
    static func storeFailed(_ error: some Error) -> Refusal {
        Refusal(status: 503, reason: "ServiceUnavailable", detail: "could not persist the change: \(error); retry")
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
