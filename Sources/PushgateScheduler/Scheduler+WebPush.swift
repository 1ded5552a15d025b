import PushgateModel

// Web Push messages: their urgency meets the device's power state (RFC 8030 section 5.3).
//
// A device's power state sets the lowest urgency it takes (`DevicePower.minimumUrgency`:
// `awake` all, `idle` `low` and above, `lowPower` only `high`). Nothing is delivered below it:
// a message held for that reason is released only when the state allows it (the device leaves
// `lowPower`, or becomes `awake`) or dropped when it expires; no wake event, keep-alive or
// budget releases it, so it never rides along with another push. A message the state allows
// follows its class's rules: `high` is delivered now and is a wake event, `normal` is delivered
// now, `low` and `very-low` are silent pushes (the app's and device's budgets, held beyond them,
// released by budget or by any wake event).

extension Scheduler {
    /// Decides what happens to a newly accepted Web Push message (`push.urgency` is set):
    ///
    /// - `low`, `very-low`: discarded while the app is `terminated`. Delivered at once when the
    ///   device is connected, its state allows the urgency, no older message of the app that
    ///   the state allows waits for budget, the app's fetch interval allows a release, and both
    ///   buckets hold a token (one is taken from each). Otherwise held.
    /// - `normal`: delivered at once when the device is connected and its state allows it,
    ///   otherwise held. Not a wake event.
    /// - `high`: delivered at once when the device is connected, and a wake event: everything
    ///   held that the state allows rides along (`piggyback`). Otherwise held.
    /// - A device with no stream gets nothing: the message is held (never stored: the state the
    ///   device reports when it comes back decides whether it goes).
    /// - `nowOrNever` (a `TTL` of 0): discarded wherever it would have been held.
    /// - `Topic` (the collapse id): delivered or held, the message replaces the app's held
    ///   message with the same topic, whatever its urgency (`coalesced`).
    func acceptWebPush(_ push: SchedulerPush, urgency: WebPushUrgency, app a: Int, now: Int64) -> Acceptance {
        let d = Int(apps[a].device)
        let allowed = devices[d].connected && urgency >= devices[d].power.minimumUrgency
        var emptyBudget: BudgetScope?
        switch urgency.pushClass {
        case .silent:
            guard apps[a].state != .terminated else { return Acceptance.discarded(.appTerminated) }
            if allowed, !hasAllowedSilent(app: a), intervalReady(a) <= now {
                emptyBudget = takeTokens(app: a, device: d, now: now)
                if emptyBudget == nil {
                    var drops: [Drop] = []
                    _ = coalesceHeld(app: a, with: push, drops: &drops)
                    rescheduleBudget(device: d)
                    return Acceptance(disposition: .delivered, releases: [immediate(push, device: d)], drops: drops)
                }
            }
        case .regular:
            if allowed {
                var output = SchedulerOutput()
                _ = coalesceHeld(app: a, with: push, drops: &output.drops)
                if urgency == .high { releaseAll(device: d, kind: .piggyback, now: now, into: &output) }
                output.releases.append(immediate(push, device: d))
                if output.releases.count > 1 { output.releases.sort { $0.id < $1.id } }
                rescheduleBudget(device: d)
                return Acceptance(disposition: .delivered, releases: output.releases, drops: output.drops)
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

    /// Whether the app holds a silent push that waits for budget and that the device's power
    /// state allows: an app's silent pushes go out oldest first, but a Web Push message the
    /// state does not allow waits for the state, not for budget, and holds nothing back.
    func hasAllowedSilent(app a: Int) -> Bool {
        firstAllowedSilent(app: a) != noSlot
    }

    /// The oldest of the app's held silent pushes that the device's power state allows.
    func firstAllowedSilent(app a: Int) -> UInt32 {
        var slot = apps[a].silent.head
        let minimum = devices[Int(apps[a].device)].power.minimumUrgency
        // Awake, every urgency is allowed.
        guard minimum != .veryLow else { return slot }
        while slot != noSlot, !Self.allows(held[Int(slot)], minimum) { slot = held[Int(slot)].next }
        return slot
    }

    /// The device's state now allows more than it did (`idle` from `lowPower`): Web Push
    /// messages of the regular class that waited only for it are delivered (`budget`: the
    /// scheduler's own release, not a wake event); silent ones now wait for budget, which the
    /// caller reschedules.
    func releaseNowAllowed(device d: Int, now: Int64, into output: inout SchedulerOutput) {
        guard devices[d].connected, devices[d].heldRegular > 0 else { return }
        release(device: d, kind: .budget, now: now, into: &output) { record in
            record.urgency != nil && !record.isSilentClass
        }
    }
}
