import PushgateModel

// What the caller persists and restores: bucket levels, held pushes, app states.
//
// On restart the caller adds devices and apps, restores their buckets and app states, then the
// held pushes, then calls `advance` once: everything that fell due while it was down (expiries,
// deferrals) happens then, and buckets hold only what elapsed time refilled. Bucket changes are
// drained into the same store commit as the deliveries that caused them, so a crash can only lose
// both together.

/// A bucket that changed since the last `drainDirtyBuckets()`.
public struct BucketChange<Handle: Hashable & Sendable>: Hashable, Sendable {
    public var handle: Handle
    public var bucket: BucketSnapshot
}

/// The buckets to persist.
public struct DirtyBuckets: Hashable, Sendable {
    public var devices: [BucketChange<DeviceHandle>]
    public var apps: [BucketChange<AppHandle>]

    public var isEmpty: Bool { devices.isEmpty && apps.isEmpty }
}

extension Scheduler {
    /// The buckets that changed (took a token) since the last call, each once, as stored. The
    /// backlog holds each slot at most once, so it never outgrows the device and app counts. A
    /// slot reused after a removal may be reported for its new occupant; that snapshot is simply
    /// its current bucket.
    public func drainDirtyBuckets() -> DirtyBuckets {
        var result = DirtyBuckets(devices: [], apps: [])
        result.devices.reserveCapacity(dirtyDevices.count)
        for slot in dirtyDevices {
            let d = Int(slot)
            devices[d].dirtyListed = false
            guard devices[d].isLive else { continue }
            result.devices.append(BucketChange(handle: deviceHandle(d), bucket: storedBucket(device: d)))
        }
        result.apps.reserveCapacity(dirtyApps.count)
        for slot in dirtyApps {
            let a = Int(slot)
            apps[a].dirtyListed = false
            guard apps[a].isLive else { continue }
            result.apps.append(BucketChange(handle: appHandle(a), bucket: storedBucket(app: a)))
        }
        dirtyDevices.removeAll(keepingCapacity: true)
        dirtyApps.removeAll(keepingCapacity: true)
        return result
    }

    /// Sets a device's bucket from a snapshot (clamped to the current burst). It refills from the
    /// snapshot's time on, and not at all before it. Returns false for an unknown handle.
    @discardableResult
    public func restoreBucket(device: DeviceHandle, _ snapshot: BucketSnapshot) -> Bool {
        guard let d = index(of: device) else { return false }
        devices[d].bucketLevel = min(snapshot.level, deviceCapacity)
        devices[d].bucketTime = snapshot.at
        rescheduleBudget(device: d)
        return true
    }

    /// Sets an app's bucket from a snapshot, as `restoreBucket(device:_:)`.
    @discardableResult
    public func restoreBucket(app: AppHandle, _ snapshot: BucketSnapshot) -> Bool {
        guard let a = index(of: app) else { return false }
        apps[a].bucketLevel = min(snapshot.level, policy(ofApp: a).appCapacity)
        apps[a].bucketTime = snapshot.at
        rescheduleBudget(device: Int(apps[a].device))
        return true
    }

    /// Takes back a held push whose acceptance could not be made durable (its provider is told
    /// to retry): it leaves without a drop. False when it is not held (already released or
    /// dropped) or the handle is unknown.
    @discardableResult
    public func withdrawHeld(id: UInt64, app: AppHandle) -> Bool {
        guard let a = index(of: app) else { return false }
        for list in [apps[a].silent, apps[a].regular] {
            var slot = list.head
            while slot != noSlot {
                if held[Int(slot)].id == id {
                    removeHeld(slot)
                    rescheduleBudget(device: Int(apps[a].device))
                    return true
                }
                slot = held[Int(slot)].next
            }
        }
        return false
    }

    /// Puts back a push that was held before a restart, deciding nothing: no budget, collapse or
    /// overflow rule is applied (the next acceptance for the app enforces `maxHeldPerApp` again).
    /// A priority-5 regular push gets its deferral deadline from `acceptedAt`. Pushes are placed by
    /// id, so any restore order works; acceptance order is the cheapest. Restoring one id twice
    /// holds it twice. Returns false for an unknown app handle.
    @discardableResult
    public func restoreHeld(_ push: SchedulerPush, acceptedAt: Int64) -> Bool {
        guard let a = index(of: push.app) else { return false }
        let silent = push.waitsForBudget
        // A Web Push message has no deferral: it waits for its urgency or budget.
        let deadline =
            !silent && push.priority == .normal && push.urgency == nil
            ? acceptedAt + policy(ofApp: a).policy.maxDeferralMillis : .max
        insertHeld(push, app: a, deadline: deadline)
        if silent { rescheduleBudget(device: Int(apps[a].device)) }
        return true
    }

    func storedBucket(device d: Int) -> BucketSnapshot {
        BucketSnapshot(level: devices[d].bucketLevel, at: devices[d].bucketTime)
    }

    func storedBucket(app a: Int) -> BucketSnapshot {
        BucketSnapshot(level: apps[a].bucketLevel, at: apps[a].bucketTime)
    }
}
