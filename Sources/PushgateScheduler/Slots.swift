import PushgateModel

/// "No slot" in every link of the records.
let noSlot = UInt32.max

/// A doubly linked list of held records, by acceptance id.
struct HeldList {
    var head = noSlot
    var tail = noSlot
    var count: UInt32 = 0
}

/// One device. Field order is layout order (Swift does not reorder stored properties), wide
/// fields first: 48 bytes a device.
struct DeviceSlot {
    var bucketTime: Int64
    /// The time of the device's pending budget timer; `noBudgetDue` when none is pending.
    var budgetDue: Int64
    var bucketLevel: UInt32
    var generation: UInt32
    /// The first of the device's apps, linked through `AppSlot.nextSibling`.
    var firstApp: UInt32
    var heldSilent: UInt32
    var heldRegular: UInt32
    /// The device's fetch windows, newest first, linked through `FetchWindowSlot.next`.
    var firstWindow: UInt32
    var isLive: Bool
    var connected: Bool
    var power: DevicePower
    /// The slot is in the dirty-bucket list (which stays bounded by the slot count because a slot
    /// is listed at most once, even across reuse).
    var dirtyListed: Bool

    static let noBudgetDue = Int64.min

    var heldTotal: UInt32 { heldSilent + heldRegular }
}

/// One app (registration): 80 bytes.
struct AppSlot {
    var bucketTime: Int64
    /// The end of the latest timeout's penalty (refill halved until then), possibly past; 0 when
    /// there was none.
    var penaltyUntil: Int64
    /// The last time a budget release took a token, for the fetch interval; `.min` before any.
    var lastBudgetAt: Int64
    var bucketLevel: UInt32
    var generation: UInt32
    var device: UInt32
    var nextSibling: UInt32
    /// Held silent pushes, oldest first.
    var silent: HeldList
    /// Deferred regular pushes (priority 5 and 1), oldest first.
    var regular: HeldList
    /// Index into the scheduler's resolved policies.
    var policy: UInt16
    /// The fetch results the refill follows, and the interval the app asked for.
    var fetch: FetchHistory
    var fetchInterval: UInt32
    var state: AppState
    var isLive: Bool
    var dirtyListed: Bool
    /// Listed in the fetch-state dirty list (results, penalty, interval, last budget release).
    var fetchDirtyListed: Bool

    static let intervalMinimum: UInt32 = 0
    static let intervalNever: UInt32 = .max
}

/// One fetch window: opened when a silent push is delivered, closed by the app's report or by its
/// end (a timeout). A closed window is kept a while (a few per device) so that a second report
/// for it is refused as already counted rather than as unknown.
struct FetchWindowSlot {
    var seq: UInt64
    var deadline: Int64
    var app: UInt32
    var appGeneration: UInt32
    var device: UInt32
    var next: UInt32
    var generation: UInt32
    /// Nil while open.
    var outcome: FetchResult?
    var isLive: Bool
}

/// One held push. Only held pushes have one, so its size does not count against an idle device.
struct HeldSlot {
    var id: UInt64
    var expiresAt: Int64
    /// The end of a priority-5 deferral; `.max` for anything else.
    var deadline: Int64
    var collapseID: String?
    var app: UInt32
    var prev: UInt32
    var next: UInt32
    var generation: UInt32
    /// In the app's silent list: waits for budget.
    var isSilent: Bool
    /// A silent push, whichever list holds it: one at priority 1 waits in the regular list for a
    /// wake event, yet counts among its app's silent pushes for collapse ids, `maxHeldPerApp`
    /// and `terminated`.
    var isSilentClass: Bool
    var isLive: Bool
    /// A Web Push message's urgency: released only while its device's power state allows it
    /// (`Scheduler.allows`). Nil for an APNs push.
    var urgency: WebPushUrgency?

    /// When this record's timer is due: its deferral end or its expiry, whichever is first.
    var due: Int64 { min(expiresAt, deadline) }
}

/// A policy with its bucket figures in bucket units.
struct ResolvedPolicy {
    let policy: SchedulerPolicy
    let appCapacity: UInt32
    /// The configured refill and its floor, in thousandths of a token per hour.
    let appRate: UInt64
    let minAppRate: UInt64
    let maxHeld: UInt32

    init(_ policy: SchedulerPolicy) {
        self.policy = policy
        appCapacity = UInt32(policy.appBurst) * TokenBucket.unit
        appRate = UInt64(policy.appRefillPerHour) * 1000
        minAppRate = UInt64(min(policy.minRefillPerHour, policy.appRefillPerHour)) * 1000
        maxHeld = UInt32(policy.maxHeldPerApp)
    }
}
