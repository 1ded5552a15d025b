import PushgateModel

// Accepting a push: deliver now, hold, store or discard.

extension Scheduler {
    /// Decides what happens to a newly accepted push.
    ///
    /// - A push whose `expiresAt` is not after `now` is discarded (`expired`).
    /// - Silent: discarded while its app is `terminated`. Released at once when the device is
    ///   connected, both buckets hold a whole token (one is taken from each) and the app has nothing
    ///   held; an app with held silent pushes queues the new one behind them, so an app's silent
    ///   pushes always go out in acceptance order; nor while the app's fetch interval keeps it
    ///   waiting (`never`, or less than its interval since its last budget release: a release at
    ///   once takes budget like any other). Never at once in `lowPower`: the budget no
    ///   longer decides there, only wake events release (Low Power Mode pauses background work on
    ///   a real device). Otherwise held (`nowOrNever`: discarded). At priority 1 never at once,
    ///   nor on budget: held until a wake event.
    /// - Regular, device not connected: `stored` (`nowOrNever`: discarded).
    /// - Priority 10: released at once, and a wake event: everything held for the device rides
    ///   along as `piggyback`: this push is their carrier.
    /// - Priority 5: released at once when the device is `awake`, else held until a wake event or
    ///   `maxDeferralMillis` after acceptance, whichever comes first.
    /// - Priority 1: held until a wake event.
    /// - Collapse ids: a held push replaces the held push of its app and class (silent or
    ///   regular, whatever their priorities) with the same collapse id (disposition
    ///   `coalesced`). A silent push delivered at once replaces a held one too (the older is
    ///   dropped as `coalesced`; the disposition stays `delivered`). A regular one does not: a
    ///   wake event delivers what was held along with it, as APNs delivers both to a device that
    ///   is online, and the device shows the newest.
    /// - Silent pushes at priority 1 count among their app's held silent pushes for
    ///   `maxHeldPerApp` and are dropped with them when the app is `terminated`.
    ///
    /// A Web Push message follows its urgency instead (`acceptWebPush`).
    ///
    /// Returns nil for an unknown app handle; nothing is recorded then.
    public func accept(_ push: SchedulerPush, now: Int64) -> Acceptance? {
        guard let a = index(of: push.app) else { return nil }
        guard push.expiresAt > now else { return Acceptance.discarded(.expired) }
        if let urgency = push.urgency { return acceptWebPush(push, urgency: urgency, app: a, now: now) }
        switch push.pushClass {
        case .silent: return acceptSilent(push, app: a, now: now)
        case .regular: return acceptRegular(push, app: a, now: now)
        }
    }

    private func acceptSilent(_ push: SchedulerPush, app a: Int, now: Int64) -> Acceptance {
        guard apps[a].state != .terminated else { return Acceptance.discarded(.appTerminated) }
        let d = Int(apps[a].device)
        var emptyBudget: BudgetScope?
        if push.waitsForBudget, devices[d].connected, devices[d].power != .lowPower, apps[a].silent.count == 0,
            intervalReady(a) <= now
        {
            emptyBudget = takeTokens(app: a, device: d, now: now)
            if emptyBudget == nil {
                // Its app holds no silent push that waits for budget, but may hold one at
                // priority 1 with its collapse id: replaced, not delivered later after it.
                var drops: [Drop] = []
                _ = coalesceHeld(app: a, with: push, drops: &drops)
                rescheduleBudget(device: d)
                return Acceptance(disposition: .delivered, releases: [immediate(push, device: d)], drops: drops)
            }
        }
        guard !push.nowOrNever else { return Acceptance.discarded(.undeliverableNow) }
        var drops: [Drop] = []
        let replaced = hold(push, app: a, deadline: .max, drops: &drops)
        rescheduleBudget(device: d)
        var acceptance = Acceptance.held(replacing: replaced, drops: drops)
        acceptance.emptyBudget = emptyBudget
        return acceptance
    }

    private func acceptRegular(_ push: SchedulerPush, app a: Int, now: Int64) -> Acceptance {
        let d = Int(apps[a].device)
        guard devices[d].connected else {
            return push.nowOrNever ? Acceptance.discarded(.undeliverableNow) : Acceptance(disposition: .stored)
        }
        switch push.priority {
        case .high:
            var output = SchedulerOutput()
            releaseAll(device: d, kind: .piggyback, now: now, into: &output)
            output.releases.append(immediate(push, device: d))
            if output.releases.count > 1 { output.releases.sort { $0.id < $1.id } }
            return Acceptance(disposition: .delivered, releases: output.releases, drops: output.drops)
        case .normal where devices[d].power == .awake:
            return Acceptance(disposition: .delivered, releases: [immediate(push, device: d)])
        case .normal, .low:
            guard !push.nowOrNever else { return Acceptance.discarded(.undeliverableNow) }
            let deadline = push.priority == .normal ? now + policy(ofApp: a).policy.maxDeferralMillis : .max
            var drops: [Drop] = []
            let replaced = hold(push, app: a, deadline: deadline, drops: &drops)
            return Acceptance.held(replacing: replaced, drops: drops)
        }
    }

    func immediate(_ push: SchedulerPush, device d: Int) -> Release {
        Release(id: push.id, device: deviceHandle(d), app: push.app, kind: .immediate)
    }
}
