import PushgateModel

/// What the scheduler needs to know of an accepted push: its id and app, and the facts that
/// decide its timing. The caller keeps the notification itself, keyed by `id`.
public struct SchedulerPush: Sendable, Hashable {
    /// The acceptance id: increasing ids are acceptance order, which every release batch follows.
    public var id: UInt64
    public var app: AppHandle
    public var pushClass: PushClass
    public var priority: PushPriority
    public var collapseID: String?
    /// Milliseconds since the epoch; at and after this instant the push is never delivered.
    public var expiresAt: Int64
    /// `apns-expiration: 0` (a Web Push `TTL` of 0): delivered now or discarded, never held or
    /// stored.
    public var nowOrNever: Bool
    /// A Web Push message's urgency (RFC 8030 section 5.3); nil for an APNs push. It replaces
    /// the priority's rules (see `Scheduler.accept`).
    public var urgency: WebPushUrgency?

    /// Held, it waits in its app's silent queue for budget (or a wake event). A silent push at
    /// priority 1 never wakes the device (PRODUCT.md section 4): it waits, as a regular one at
    /// priority 1 does, for a wake event only, and takes no budget.
    var waitsForBudget: Bool { pushClass == .silent && priority != .low }

    public init(
        id: UInt64,
        app: AppHandle,
        pushClass: PushClass,
        priority: PushPriority,
        collapseID: String? = nil,
        expiresAt: Int64,
        nowOrNever: Bool = false,
        urgency: WebPushUrgency? = nil
    ) {
        self.id = id
        self.app = app
        self.pushClass = pushClass
        self.priority = priority
        self.collapseID = collapseID
        self.expiresAt = expiresAt
        self.nowOrNever = nowOrNever
        self.urgency = urgency
    }

    /// The scheduler's view of `notification`, whose registration is `app`.
    public init(_ notification: AcceptedPush, app: AppHandle, nowOrNever: Bool) {
        self.init(
            id: notification.acceptanceID,
            app: app,
            pushClass: notification.push.pushClass,
            priority: notification.push.priority,
            collapseID: notification.push.collapseID,
            expiresAt: notification.expiresAt,
            nowOrNever: nowOrNever,
            urgency: notification.push.urgency
        )
    }
}
