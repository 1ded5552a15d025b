import NIOCore
import PushgateModel
import PushgateScheduler
import PushgateStore

// Keep-alives (a wake event answered with what they release) and reported power and app states.
extension DeviceShard {
    /// A wake event: what the scheduler held for the device goes in the response (and is acked
    /// like any other notification). Succeeds, once on disk, with the released notifications,
    /// with their seqs, in order; they came by `keepalive`.
    func keepalive(deviceID: String, secret: String, promise: EventLoopPromise<[KeepaliveRelease]>) {
        guard let device = authenticate(deviceID: deviceID, secret: secret) else {
            promise.fail(Refusal.unauthorized)
            return
        }
        var commands: [StoreCommand] = []
        var entries: [QueuedEntry] = []
        let released = apply(
            scheduler.keepalive(device.handle, now: clock.nowMillis()),
            keepalive: true,
            into: &commands,
            entries: &entries
        )
        finish(commands, entries: entries) { [self] result in
            switch result {
            case .success:
                let now = clock.nowMillis()
                for notification in released {
                    counters.recordDelivery(.keepalive)
                    metrics.deliveryLatency.record(millis: now - notification.acceptedAt)
                }
                // Released at the tail of the queue: looked up from the end.
                let entries = released.compactMap { record in device.queue.last { $0.seq == record.seq } }
                openFetchWindows(entries, on: device, now: now)
                let policy = scheduler.configuration
                promise.succeed(
                    released.map {
                        KeepaliveRelease(notification: $0, fetchWindowSeconds: policy.fetchWindowSeconds(of: $0))
                    }
                )
            case .failure(let error):
                promise.fail(Refusal.storeFailed(error))
            }
        }
    }

    /// Power and app states and fetch intervals the device reports. Topics must be registered
    /// on the device.
    func setState(
        deviceID: String,
        secret: String,
        power: DevicePower?,
        apps: [(topic: String, state: AppState)],
        fetchIntervals: [(topic: String, interval: FetchInterval)] = [],
        promise: EventLoopPromise<Void>
    ) {
        guard let device = authenticate(deviceID: deviceID, secret: secret) else {
            promise.fail(Refusal.unauthorized)
            return
        }
        var targets: [(token: String, app: AppHandle, state: AppState)] = []
        for (topic, state) in apps {
            guard let token = device.tokensByTopic[topic], let app = registrations[token]?.app else {
                promise.fail(
                    Refusal(.badTopic, "\(topic) is not registered on this device; register it first")
                )
                return
            }
            targets.append((token, app, state))
        }
        var intervals: [(app: AppHandle, interval: FetchInterval)] = []
        for (topic, interval) in fetchIntervals {
            guard let token = device.tokensByTopic[topic], let app = registrations[token]?.app else {
                promise.fail(
                    Refusal(.badTopic, "fetchIntervals: \(topic) is not registered on this device; register it first")
                )
                return
            }
            intervals.append((app, interval))
        }
        for (app, interval) in intervals { scheduler.setFetchInterval(app, interval) }
        var commands: [StoreCommand] = []
        var entries: [QueuedEntry] = []
        for target in targets {
            forget(scheduler.setAppState(target.app, target.state), into: &commands)
            // What the scheduler applied: `background` leaves a terminated app terminated.
            let applied = scheduler.appState(target.app) ?? target.state
            commands.append(.setAppState(token: target.token, state: applied))
        }
        if let power {
            _ = apply(
                scheduler.setPower(device.handle, power, now: clock.nowMillis()),
                into: &commands,
                entries: &entries
            )
        }
        finish(commands, entries: entries) { result in
            promise.completeWith(result.mapError { Refusal.storeFailed($0) as any Error })
        }
    }
}
