/// What `accept` decided for a push (the `pushgate-disposition` header, by `name`).
public enum Disposition: Sendable, Hashable {
    /// Released now: it is among the acceptance's releases, as `immediate`.
    case delivered
    /// Held by the scheduler until a wake event, a budget release, its deferral deadline or expiry.
    case held
    /// Held, replacing the held push `replaced` (same app, same class, same collapse id), which is
    /// reported among the drops as `coalesced`.
    case coalesced(replaced: UInt64)
    /// A regular push for a device with no open stream: the caller keeps it in the device's
    /// offline queue and sends it on reconnect. The scheduler does not remember it.
    case stored
    /// Not kept at all.
    case discarded(DiscardReason)

    public var name: String {
        switch self {
        case .delivered: "delivered"
        case .held: "held"
        case .coalesced: "coalesced"
        case .stored: "stored"
        case .discarded: "discarded"
        }
    }
}

public enum DiscardReason: String, Sendable, Hashable {
    /// A silent push for an app in state `terminated`.
    case appTerminated = "app_terminated"
    /// `nowOrNever` and the push could not be released at once.
    case undeliverableNow = "undeliverable_now"
    /// `expiresAt` was not after the acceptance time.
    case expired
}

/// How a released push reached the device (the event's `delivery` field, by `name`).
public enum ReleaseKind: Sendable, Hashable {
    /// The push was released on acceptance.
    case immediate
    /// Held, released by the wake event of the priority-10 push `carrier`.
    case piggyback(carrier: UInt64)
    /// Held, released by the device's keep-alive (goes in its response).
    case keepalive
    /// Held, released because the device came online or reported `awake`.
    case online
    /// Held, released by the scheduler's own timing: a silent push when both buckets had a token,
    /// or a priority-5 push whose `maxDeferral` ran out. Both are the scheduler deciding "now"
    /// without a wake event, which is what `budget` tells the agent.
    case budget

    public var name: String {
        switch self {
        case .immediate: "immediate"
        case .piggyback: "piggyback"
        case .keepalive: "keepalive"
        case .online: "online"
        case .budget: "budget"
        }
    }
}

/// One push to deliver now.
public struct Release: Sendable, Hashable {
    public var id: UInt64
    public var device: DeviceHandle
    public var app: AppHandle
    public var kind: ReleaseKind

    public init(id: UInt64, device: DeviceHandle, app: AppHandle, kind: ReleaseKind) {
        self.id = id
        self.device = device
        self.app = app
        self.kind = kind
    }
}

/// Why a held push was dropped; `rawValue` is the metric label.
public enum DropReason: String, Sendable, Hashable, CaseIterable {
    case expired
    case overflow
    case coalesced
    case appTerminated = "app_terminated"
    case unregistered
}

/// One held push the scheduler gave up on; the caller deletes it and counts it.
public struct Drop: Sendable, Hashable {
    public var id: UInt64
    public var device: DeviceHandle
    public var app: AppHandle
    public var reason: DropReason

    public init(id: UInt64, device: DeviceHandle, app: AppHandle, reason: DropReason) {
        self.id = id
        self.device = device
        self.app = app
        self.reason = reason
    }
}

/// The effect of an event other than an acceptance.
public struct SchedulerOutput: Sendable, Hashable {
    /// In acceptance order (within a device; across devices too, as ids are global).
    public var releases: [Release]
    public var drops: [Drop]

    public init(releases: [Release] = [], drops: [Drop] = []) {
        self.releases = releases
        self.drops = drops
    }

    public var isEmpty: Bool { releases.isEmpty && drops.isEmpty }
}

/// The effect of `accept`.
public struct Acceptance: Sendable, Hashable {
    public var disposition: Disposition
    /// In acceptance order. With `.delivered`, the push itself as `immediate` and, when it was a
    /// wake event (priority 10), everything that was held for the device, as `piggyback`.
    public var releases: [Release]
    /// Held pushes this one pushed out: `coalesced` (the one it replaced) or `overflow` (the app's
    /// oldest held silent push). Also `expired` held pushes met while piggybacking.
    public var drops: [Drop]

    public init(disposition: Disposition, releases: [Release] = [], drops: [Drop] = []) {
        self.disposition = disposition
        self.releases = releases
        self.drops = drops
    }
}
