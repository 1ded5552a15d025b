import PushgateModel

// Due work: budget releases, deferral deadlines, expiry and fetch windows' ends, all from one
// heap of timers.

extension Scheduler {
    /// When `advance(now:)` should next be called: the earliest pending timer, or nil when nothing
    /// is pending. It can be at or before the time of the last call (a lowered power state or a
    /// restored bucket can make a release due at once): then call `advance` right away.
    /// Reading it discards stale timers from the top of the heap.
    public var nextDeadline: Int64? {
        while let first = timers.first, !isCurrent(first) { timers.removeFirst() }
        return timers.first?.time
    }

    /// Does the work due at or before `now`: budget releases (a held silent push whose app and
    /// device buckets both hold a token again and whose app's fetch interval allows it, while the
    /// device is connected and not in `lowPower`), priority-5 deferrals that ran out (released as
    /// `budget` when the device is connected; otherwise left for its next wake event), expiries
    /// (dropped as `expired`), fetch windows that ended without a report (`fetchTimeouts`, each
    /// counted against its app from the window's end).
    /// Releases come out in acceptance order.
    public func advance(now: Int64) -> SchedulerOutput {
        var output = SchedulerOutput()
        while let first = timers.first, first.time <= now {
            timers.removeFirst()
            guard isCurrent(first) else { continue }
            switch first.kind {
            case .budget: releaseByBudget(device: Int(first.slot), now: now, into: &output)
            case .held: fire(held: first.slot, now: now, into: &output)
            case .fetchWindow: timeOut(window: Int(first.slot), into: &output)
            }
        }
        if output.releases.count > 1 { output.releases.sort { $0.id < $1.id } }
        return output
    }

    // MARK: Buckets

    /// The app bucket's level at `now` (refilled since its last change, capped), at the rate its
    /// fetch results give, and at the penalty's rate up to the penalty's end when that falls in
    /// between (whether or not its timer has fired yet).
    func appLevel(_ a: Int, now: Int64) -> UInt32 {
        let capacity = policy(ofApp: a).appCapacity
        var level = apps[a].bucketLevel
        var time = apps[a].bucketTime
        let penaltyEnd = apps[a].penaltyUntil
        if penaltyEnd > time, penaltyEnd < now {
            level = TokenBucket.level(
                level,
                at: time,
                now: penaltyEnd,
                capacity: capacity,
                milliPerHour: appRate(a, at: time)
            )
            time = penaltyEnd
        }
        return TokenBucket.level(level, at: time, now: now, capacity: capacity, milliPerHour: appRate(a, at: time))
    }

    /// The device bucket's level at `now`.
    func deviceLevel(_ d: Int, now: Int64) -> UInt32 {
        TokenBucket.level(
            devices[d].bucketLevel,
            at: devices[d].bucketTime,
            now: now,
            capacity: deviceCapacity,
            milliPerHour: deviceRate
        )
    }

    /// Takes a token from the app's and the device's bucket if both have a whole one; returns
    /// the bucket that had none (the app's first) otherwise.
    func takeTokens(app a: Int, device d: Int, now: Int64) -> BudgetScope? {
        let appLevel = appLevel(a, now: now)
        guard appLevel >= TokenBucket.unit else { return .app }
        let deviceLevel = deviceLevel(d, now: now)
        guard deviceLevel >= TokenBucket.unit else { return .device }
        // Never move a bucket's time backwards: its level already counts the refill up to it.
        apps[a].bucketLevel = appLevel - TokenBucket.unit
        apps[a].bucketTime = max(apps[a].bucketTime, now)
        apps[a].lastBudgetAt = now
        // Only an interval reads it, so only then is it worth a store write.
        if apps[a].fetchInterval != AppSlot.intervalMinimum { markFetchDirty(a) }
        devices[d].bucketLevel = deviceLevel - TokenBucket.unit
        devices[d].bucketTime = max(devices[d].bucketTime, now)
        markBucketDirty(app: a)
        markBucketDirty(device: d)
        return nil
    }

    /// Lists the app's bucket for the next `drainDirtyBuckets()`, once.
    func markBucketDirty(app a: Int) {
        guard !apps[a].dirtyListed else { return }
        apps[a].dirtyListed = true
        dirtyApps.append(UInt32(a))
    }

    func markBucketDirty(device d: Int) {
        guard !devices[d].dirtyListed else { return }
        devices[d].dirtyListed = true
        dirtyDevices.append(UInt32(d))
    }

    /// Sets the device's budget timer to the first instant at which the device bucket and the
    /// bucket of at least one app with held silent pushes both hold a whole token (and that app's
    /// fetch interval allows a release), or clears it when no budget release can happen
    /// (disconnected, `lowPower`, nothing silent held that the power state allows, every such
    /// app's interval `never`).
    func rescheduleBudget(device d: Int) {
        guard devices[d].connected, devices[d].power != .lowPower, devices[d].heldSilent > 0 else {
            devices[d].budgetDue = DeviceSlot.noBudgetDue
            return
        }
        var appReady = Int64.max
        var a = devices[d].firstApp
        while a != noSlot {
            let app = apps[Int(a)]
            if app.silent.count > 0, hasAllowedSilent(app: Int(a)) {
                let ready = appTokenTime(Int(a), now: app.bucketTime)
                appReady = min(appReady, max(ready, intervalReady(Int(a))))
            }
            a = app.nextSibling
        }
        guard appReady != .max else {
            devices[d].budgetDue = DeviceSlot.noBudgetDue
            return
        }
        let deviceReady = TokenBucket.tokenTime(
            devices[d].bucketLevel,
            at: devices[d].bucketTime,
            milliPerHour: deviceRate
        )
        let due = max(appReady, deviceReady)
        guard due != devices[d].budgetDue else { return }
        devices[d].budgetDue = due
        schedule(.budget(device: UInt32(d), generation: devices[d].generation, at: due))
    }

    /// Budget releases for one device: while the device bucket has a token, the oldest held silent
    /// push among the apps whose bucket has one goes out. Expired heads are dropped on the way.
    private func releaseByBudget(device d: Int, now: Int64, into output: inout SchedulerOutput) {
        devices[d].budgetDue = DeviceSlot.noBudgetDue
        while devices[d].connected, devices[d].power != .lowPower, devices[d].heldSilent > 0 {
            var best = noSlot
            var bestApp = 0
            var a = devices[d].firstApp
            while a != noSlot {
                let app = Int(a)
                while apps[app].silent.head != noSlot, held[Int(apps[app].silent.head)].expiresAt <= now {
                    output.drops.append(drop(removeHeld(apps[app].silent.head), reason: .expired))
                }
                // A Web Push message the power state does not allow is passed over: it waits for
                // the state, not for budget.
                let head = firstAllowedSilent(app: app)
                if head != noSlot, isOlder(head, than: best), intervalReady(app) <= now, hasToken(app: app, now: now) {
                    best = head
                    bestApp = app
                }
                a = apps[app].nextSibling
            }
            guard best != noSlot, takeTokens(app: bestApp, device: d, now: now) == nil else { break }
            output.releases.append(release(removeHeld(best), kind: .budget))
        }
        rescheduleBudget(device: d)
        // The pass released all the buckets allow at `now`, so the next budget time is later.
        // Enforcing it keeps `advance` from ever spinning on a timer it keeps re-adding.
        if devices[d].budgetDue != DeviceSlot.noBudgetDue, devices[d].budgetDue <= now {
            devices[d].budgetDue = now + 1
            schedule(.budget(device: UInt32(d), generation: devices[d].generation, at: now + 1))
        }
    }

    private func isOlder(_ slot: UInt32, than other: UInt32) -> Bool {
        other == noSlot || held[Int(slot)].id < held[Int(other)].id
    }

    private func hasToken(app a: Int, now: Int64) -> Bool {
        appLevel(a, now: now) >= TokenBucket.unit
    }

    // MARK: Held timers

    /// A held push's timer: it expired, or its priority-5 deferral ran out.
    private func fire(held slot: UInt32, now: Int64, into output: inout SchedulerOutput) {
        let record = held[Int(slot)]
        let d = Int(apps[Int(record.app)].device)
        if record.expiresAt <= now {
            output.drops.append(drop(removeHeld(slot), reason: .expired))
            if record.isSilent { rescheduleBudget(device: d) }
        } else if devices[d].connected {
            output.releases.append(release(removeHeld(slot), kind: .budget))
        } else {
            // Offline: there is no stream to release it to; its next wake event is the reconnect.
            held[Int(slot)].deadline = .max
            schedule(.held(slot: slot, generation: record.generation, at: record.expiresAt))
        }
    }

    // MARK: Heap

    func schedule(_ timer: Timer) {
        timers.push(timer)
        guard timers.count > compactionThreshold else { return }
        timers.retain { isCurrent($0) }
        compactionThreshold = max(1024, 2 * timers.count)
    }

    /// A timer is current when its target still exists and still wants it at that time.
    func isCurrent(_ timer: Timer) -> Bool {
        let slot = Int(timer.slot)
        switch timer.kind {
        case .budget:
            let device = devices[slot]
            return device.isLive && timer.matches(generation: device.generation) && device.budgetDue == timer.time
        case .held:
            let record = held[slot]
            return record.isLive && timer.matches(generation: record.generation) && record.due == timer.time
        case .fetchWindow:
            let window = windows[slot]
            return window.isLive && timer.matches(generation: window.generation) && window.outcome == nil
                && window.deadline == timer.time
        }
    }
}
