import PushgateModel
import PushgateScheduler
import PushgateStore

// Wake events and reported states, as plans.
extension ShardState {
    /// A keep-alive: what the scheduler held for the device is released into the response (and
    /// acked like any other notification). Returns the plan and the released pushes, with their
    /// seqs, in order.
    func keepalive(_ device: DeviceState) -> (plan: ShardPlan, released: [AcceptedPush]) {
        var plan = ShardPlan()
        let released = apply(scheduler.keepalive(device.handle, now: clock.nowMillis()), keepalive: true, into: &plan)
        return (plan, released)
    }

    /// The keep-alive's plan committed: its releases count as delivered now (the response
    /// carries them) and open their fetch windows. Returns the commands recording the windows.
    func confirmKeepalive(_ released: [AcceptedPush], on device: DeviceState) -> [StoreCommand] {
        let now = clock.nowMillis()
        for notification in released {
            counters.recordDelivery(.keepalive)
            metrics.deliveryLatency.record(millis: now - notification.acceptedAt)
        }
        // Released at the tail of the queue: looked up from the end.
        let entries = released.compactMap { record in device.queue.last { $0.seq == record.seq } }
        return openFetchWindows(entries, on: device, now: now)
    }

    /// Power and app states and fetch intervals the device reports: refused (changing nothing)
    /// when a topic is not registered on the device, else a plan, and what is in force after it.
    func setState(
        of device: DeviceState,
        power: DevicePower?,
        apps: [(topic: String, state: AppState)],
        fetchIntervals: [(topic: String, interval: FetchInterval)]
    ) -> Result<(plan: ShardPlan, applied: AppliedState), Refusal> {
        var targets: [(token: String, app: AppHandle, state: AppState)] = []
        for (topic, state) in apps {
            guard let token = device.tokensByTopic[topic], let app = registrations[token]?.app else {
                return .failure(Refusal(.badTopic, "\(topic) is not registered on this device; register it first"))
            }
            targets.append((token, app, state))
        }
        var intervals: [(app: AppHandle, interval: FetchInterval)] = []
        for (topic, interval) in fetchIntervals {
            guard let token = device.tokensByTopic[topic], let app = registrations[token]?.app else {
                return .failure(
                    Refusal(.badTopic, "fetchIntervals: \(topic) is not registered on this device; register it first")
                )
            }
            intervals.append((app, interval))
        }
        for (app, interval) in intervals { scheduler.setFetchInterval(app, interval) }
        var plan = ShardPlan()
        var applied = AppliedState(power: .awake, apps: [])
        for (target, topic) in zip(targets, apps.map(\.topic)) {
            dropHeld(scheduler.setAppState(target.app, target.state), into: &plan)
            // What the scheduler applied: `background` leaves a terminated app terminated.
            let state = scheduler.appState(target.app) ?? target.state
            plan.commands.append(.setAppState(token: target.token, state: state))
            applied.apps.append(AppliedState.App(topic: topic, reported: target.state, state: state))
        }
        if let power { apply(scheduler.setPower(device.handle, power, now: clock.nowMillis()), into: &plan) }
        applied.power = scheduler.power(device.handle) ?? .awake
        return .success((plan, applied))
    }
}
