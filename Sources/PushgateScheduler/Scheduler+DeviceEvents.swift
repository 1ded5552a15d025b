import PushgateModel

// What devices report: streams opening and closing, keep-alives, power and app states.

extension Scheduler {
    /// The device's event stream opened (or a new one replaced the old): a wake event. Everything
    /// held for the device is released as `online`; the caller sends its stored pushes first.
    /// Empty for an unknown handle.
    public func connect(_ device: DeviceHandle, now: Int64) -> SchedulerOutput {
        guard let d = index(of: device) else { return SchedulerOutput() }
        devices[d].connected = true
        var output = SchedulerOutput()
        releaseAll(device: d, kind: .online, now: now, into: &output)
        return output
    }

    /// The device's event stream closed. Held pushes stay held for the next wake event; no budget
    /// release happens until it reconnects. Unknown handles are ignored.
    public func disconnect(_ device: DeviceHandle) {
        guard let d = index(of: device) else { return }
        devices[d].connected = false
        devices[d].budgetDue = DeviceSlot.noBudgetDue
    }

    /// A keep-alive: a wake event. Everything held is released as `keepalive`, for the keep-alive's
    /// response, whether or not an event stream is open. Empty for an unknown handle.
    public func keepalive(_ device: DeviceHandle, now: Int64) -> SchedulerOutput {
        guard let d = index(of: device) else { return SchedulerOutput() }
        var output = SchedulerOutput()
        releaseAll(device: d, kind: .keepalive, now: now, into: &output)
        return output
    }

    /// A power report. Going to `awake` from another state while connected is a wake event:
    /// everything held is released as `online` (the device is up and listening, which is what
    /// `online` tells the agent). Reporting `awake` again is not: an agent repeating it must not
    /// be able to bypass the silent budget. `lowPower` stops budget releases until the device
    /// leaves it. A state that allows a lower Web Push urgency than before releases what waited
    /// only for it (`releaseNowAllowed`). Empty for an unknown handle.
    public func setPower(_ device: DeviceHandle, _ power: DevicePower, now: Int64) -> SchedulerOutput {
        guard let d = index(of: device) else { return SchedulerOutput() }
        let previous = devices[d].power
        devices[d].power = power
        var output = SchedulerOutput()
        if power == .awake, previous != .awake, devices[d].connected {
            releaseAll(device: d, kind: .online, now: now, into: &output)
        } else {
            if power.minimumUrgency < previous.minimumUrgency {
                releaseNowAllowed(device: d, now: now, into: &output)
            }
            rescheduleBudget(device: d)
        }
        return output
    }

    /// An app state report. `terminated` drops the app's held silent pushes (`app_terminated`) and
    /// makes new ones `discarded`; only `foreground` lifts it, so `background` while terminated
    /// changes nothing. Held regular pushes are kept: a real device still shows alerts of a
    /// force-quit app. Empty for an unknown handle.
    public func setAppState(_ app: AppHandle, _ state: AppState) -> [Drop] {
        guard let a = index(of: app) else { return [] }
        var drops: [Drop] = []
        switch state {
        case .terminated:
            apps[a].state = .terminated
            dropSilent(of: a, reason: .appTerminated, into: &drops)
            rescheduleBudget(device: Int(apps[a].device))
        case .background:
            if apps[a].state != .terminated { apps[a].state = .background }
        case .foreground:
            apps[a].state = .foreground
        }
        return drops
    }
}
