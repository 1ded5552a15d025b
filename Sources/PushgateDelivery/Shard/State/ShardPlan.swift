import PushgateModel
import PushgateScheduler
import PushgateStore

/// One change to a shard's devices, as `ShardState` planned it: applied to memory already, so
/// that the next request on the loop sees it, and made durable by its store commands. The
/// driver (`DeviceShard.carryOut`) commits the commands, then either confirms the plan (its
/// queue entries are committed and may be written to their streams) or restores it, through
/// `ShardState.restore`, the one place that puts memory back when a commit fails.
struct ShardPlan: Equatable {
    /// What makes the change durable, in order.
    var commands: [StoreCommand] = []
    /// Notifications appended to their devices' queues, waiting for the commit.
    var entries: [PlannedEntry] = []
    /// What `ShardState.restore` undoes if the commit fails, newest last (undone newest first).
    /// Seq reservations among `commands` are undone without an entry of their own.
    var restorations: [Restoration] = []
    /// Devices the plan changes that its commands do not name (the notifications a `remove`
    /// deletes are theirs): their ownership is checked with the commit too (`ShardState.seal`).
    var devices: Set<String> = []

    var isEmpty: Bool { commands.isEmpty && entries.isEmpty && restorations.isEmpty }
}

/// A queue entry a plan added: found again by its device and seq.
struct PlannedEntry: Equatable {
    var deviceID: String
    var seq: UInt64
    /// A held push the plan released (rather than a push it accepted): confirmed, its hold ends.
    var released = false
}

/// One change to memory that a failed commit undoes.
enum Restoration: Equatable {
    /// The plan held this push: it is not held after all.
    case unhold(acceptanceID: UInt64, app: AppHandle)
    /// The plan took this push out of the held set (released or dropped it), but it is still
    /// held on disk: held again, to be released by the next wake event, not only after a restart.
    case hold(AcceptedPush)
    /// The plan applied these acknowledgement deletions in memory: the device's next ack
    /// carries them to the disk, so that an ack answered once is durable.
    case ackDeletions(deviceID: String, [StoreCommand])
    /// The plan created this device.
    case createdDevice(id: String, handle: DeviceHandle)
    /// The plan registered this app on its device.
    case registered(token: String, deviceID: String, topic: String, app: AppHandle?)
}

/// What a provider push becomes, before its commit.
enum AcceptanceDecision {
    /// Refused: nothing changed.
    case refused(Refusal)
    /// Answered at once, before anything is durable: an expired push, or one the device cannot
    /// take now that must not wait (`apns-expiration: 0`, a terminated app). Its plan (drops
    /// the scheduler made on the way) is carried out without anyone waiting for it.
    case answered(Disposition, ShardPlan)
    /// Answered with `disposition` once its plan commits.
    case planned(AcceptancePlan)
}

/// A provider push's plan and what its answer needs once the plan commits.
struct AcceptancePlan: Equatable {
    var plan: ShardPlan
    var disposition: Disposition
    var deviceID: String
    var acceptanceID: UInt64
    /// Stored pushes this one replaces (same collapse id): they leave the queue once the commit
    /// that removes them from disk succeeds. Taken out earlier, a failed commit would leave them
    /// on disk but out of the queue, undelivered until a restart.
    var replacing: Set<UInt64> = []
    /// The bucket found empty when the push was held, for the counter and the held event.
    var emptyBudget: BudgetScope?
}
