/// Silent pushes are budgeted and held; regular ones are scheduled by priority only.
public enum PushClass: UInt8, Sendable, Hashable {
    case silent
    case regular
}

/// `apns-priority`.
public enum PushPriority: UInt8, Sendable, Hashable {
    /// 10: delivered at once, and a wake event for the device.
    case high = 10
    /// 5: delivered at once when the device is awake, else deferred.
    case normal = 5
    /// 1: waits for a wake event.
    case low = 1
}

/// What the scheduler needs to know of an accepted push. The caller keeps the payload, keyed by `id`.
public struct SchedulerPush: Sendable, Hashable {
    /// The acceptance id: increasing ids are acceptance order, which every release batch follows.
    public var id: UInt64
    public var app: AppHandle
    public var pushClass: PushClass
    public var priority: PushPriority
    public var collapseID: String?
    /// Milliseconds since the epoch; at and after this instant the push is never delivered.
    public var expiresAt: Int64
    /// `apns-expiration: 0`: delivered now or discarded, never held or stored.
    public var nowOrNever: Bool

    public init(
        id: UInt64,
        app: AppHandle,
        pushClass: PushClass,
        priority: PushPriority,
        collapseID: String? = nil,
        expiresAt: Int64,
        nowOrNever: Bool = false
    ) {
        self.id = id
        self.app = app
        self.pushClass = pushClass
        self.priority = priority
        self.collapseID = collapseID
        self.expiresAt = expiresAt
        self.nowOrNever = nowOrNever
    }
}
