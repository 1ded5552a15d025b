import PushgateModel

// A new policy for a running scheduler: what a configuration reload does to its state.

extension Scheduler {
    /// Puts `configuration` in force from `now`, keeping every device, app, held push and fetch
    /// figure. What the new policy means for the state already there:
    ///
    /// - **Buckets** (apps' and devices'): the tokens a bucket has used stay used. Its level
    ///   moves by the change of its size, within zero and the new size: a full bucket stays
    ///   full; with 1 of 3 tokens left, a size of 10 leaves 8 and a size of 2 leaves 0. It
    ///   refills at the new rate from `now` on: a new rate is never applied to the time before
    ///   it was in force, so a lower rate takes back no token the old one gave.
    /// - **Held silent pushes** are checked against the new buckets at once: what they allow now
    ///   is released (`budget`) in the returned output, in acceptance order; the rest waits for
    ///   the new budget times or a wake event.
    /// - **Held priority-5 pushes** are deferred until their acceptance plus the new
    ///   `maxDeferralMillis`; one whose new end has passed is released (`budget`) in the returned
    ///   output when its device is connected.
    /// - A lower **`maxHeldPerApp`** drops nothing by itself: the app's next silent push enforces
    ///   it, as after a restart (a mistyped limit must not destroy what is held).
    /// - **Fetch windows** already open keep the end their agent was told, and running
    ///   **penalties** keep theirs; windows and penalties starting from now take the new lengths.
    ///   Pushes keep their expiry: `defaultExpirationMillis` is read at acceptance.
    /// - Each app takes its topic's policy in the new configuration: `topic` names an app's
    ///   topic (nil: the global policy).
    ///
    /// Buckets whose stored form would give another level after a restart are reported by the
    /// next `drainDirtyBuckets()`; buckets whose size and rate did not change, and full ones
    /// that stay full, are not rewritten. The returned
    /// output also carries any other work due at `now`. A configuration equal to the one in
    /// force changes nothing. An invalid one throws and changes nothing.
    ///
    /// O(devices + apps + held priority-5 pushes): a reload is rare, and one pass over the
    /// shard's dense arrays is cheaper than keeping per-policy indexes for it.
    public func reconfigure(
        _ configuration: SchedulerConfiguration,
        now: Int64,
        topic: (AppHandle) -> String?
    ) throws(SchedulerConfigurationError) -> SchedulerOutput {
        try configuration.validate()
        guard configuration != self.configuration else { return SchedulerOutput() }
        // Levels at `now` under the policy in force, before anything changes.
        let (before, after) = (self.configuration.global, configuration.global)
        let devicesChange =
            (before.deviceBurst, before.deviceRefillPerHour) != (after.deviceBurst, after.deviceRefillPerHour)
        let deviceLevels =
            devicesChange ? devices.indices.map { devices[$0].isLive ? deviceLevel($0, now: now) : 0 } : []
        let appLevels = apps.indices.map { apps[$0].isLive ? appLevel($0, now: now) : 0 }
        let oldDeviceCapacity = deviceCapacity
        let oldPolicies = policies
        install(configuration)
        for a in apps.indices where apps[a].isLive {
            let old = oldPolicies[Int(apps[a].policy)]
            apps[a].policy = topic(appHandle(a)).flatMap { policyIndexByTopic[$0] } ?? 0
            let new = policy(ofApp: a)
            if (old.appCapacity, old.appRate, old.minAppRate) != (new.appCapacity, new.appRate, new.minAppRate) {
                let level = Self.carriedLevel(appLevels[a], oldCapacity: old.appCapacity, newCapacity: new.appCapacity)
                if level != new.appCapacity || appLevel(a, now: now) != new.appCapacity {
                    apps[a].bucketLevel = level
                    apps[a].bucketTime = max(apps[a].bucketTime, now)
                    markBucketDirty(app: a)
                }
            }
            let shift = new.policy.maxDeferralMillis - old.policy.maxDeferralMillis
            if shift != 0 { shiftDeferrals(app: a, by: shift) }
        }
        if devicesChange {
            for d in devices.indices where devices[d].isLive {
                let level = Self.carriedLevel(
                    deviceLevels[d],
                    oldCapacity: oldDeviceCapacity,
                    newCapacity: deviceCapacity
                )
                if level != deviceCapacity || deviceLevel(d, now: now) != deviceCapacity {
                    devices[d].bucketLevel = level
                    devices[d].bucketTime = max(devices[d].bucketTime, now)
                    markBucketDirty(device: d)
                }
            }
        }
        // After every app of a device has its new bucket: a device's budget time depends on all.
        for d in devices.indices where devices[d].isLive { rescheduleBudget(device: d) }
        return advance(now: now)
    }

    /// A bucket's level under its new size: what it used of the old size stays used.
    private static func carriedLevel(_ level: UInt32, oldCapacity: UInt32, newCapacity: UInt32) -> UInt32 {
        let used = oldCapacity - min(level, oldCapacity)
        return newCapacity - min(used, newCapacity)
    }

    /// Moves the deferral ends of the app's held regular pushes by `shift`: each was its
    /// acceptance (or its collapse group's first) plus the old `maxDeferralMillis`.
    private func shiftDeferrals(app a: Int, by shift: Int64) {
        var slot = apps[a].regular.head
        while slot != noSlot {
            let s = Int(slot)
            // `.max`: priority 1, or a deferral that ran out while its device was offline.
            if held[s].deadline != .max {
                let due = held[s].due
                held[s].deadline += shift
                if held[s].due != due { schedule(.held(slot: slot, generation: held[s].generation, at: held[s].due)) }
            }
            slot = held[s].next
        }
    }
}
