import NIOCore
import PushgateModel
import PushgateScheduler
import PushgateStore

// A provider push, from its registration to its disposition.
extension DeviceShard {
    func accept(_ push: Push, expiration: Expiration, promise: EventLoopPromise<Disposition>) {
        guard let registration = registrations[push.deviceToken] else {
            promise.fail(Refusal.unknownDeviceToken(push.deviceToken))
            return
        }
        // The topic first, and named alone: a provider pushing to another app's token learns
        // neither that app's topic nor when it was unregistered.
        guard registration.topic == push.topic else {
            promise.fail(Refusal(.deviceTokenNotForTopic, "the token is not registered for \(push.topic)"))
            return
        }
        // Checked before the device: a deleted device's tokens are unregistered, not unknown.
        if let at = registration.unregisteredAt {
            promise.fail(Refusal(.unregistered, "the token was unregistered; stop sending to it", timestamp: at))
            return
        }
        guard let device = devices[registration.deviceID] else {
            promise.fail(Refusal.unknownDeviceToken(push.deviceToken))
            return
        }
        guard let app = registration.app else {
            promise.fail(Refusal(.internalServerError, "registration \(push.deviceToken) has no scheduler state"))
            return
        }
        let now = clock.nowMillis()
        let expiresAt: Int64
        let latest = now + configuration.maxExpirationMillis
        switch expiration {
        case .defaultLifetime:
            expiresAt = min(
                now + scheduler.configuration.policy(forTopic: registration.topic).defaultExpirationMillis,
                latest
            )
        case .immediately:
            expiresAt = now + configuration.immediateGraceMillis
        case .at(let seconds):
            expiresAt = seconds.multipliedReportingOverflow(by: 1000).overflow ? latest : min(seconds * 1000, latest)
            if expiresAt <= now {
                counters.recordDisposition(.discarded)
                promise.succeed(.discarded)
                return
            }
        }
        guard queuedBudget.fits(QueuedNotificationBudget.cost(payloadBytes: push.payload.count)) else {
            promise.fail(Refusal.gatewayQueuesFull(megabytes: queuedBudget.limit >> 20))
            return
        }
        let waiting = device.queue.count + device.heldCount
        guard waiting < configuration.maxQueuedPerDevice else {
            promise.fail(Refusal.deviceQueueFull(waiting: waiting))
            return
        }
        // Counted only when the device holds enough for one app to be at its limit: a scan of
        // the queue, never on the usual path.
        if waiting >= configuration.maxQueuedPerApp {
            var ofThisApp = 0
            for entry in device.queue where entry.record.push.deviceToken == push.deviceToken { ofThisApp += 1 }
            guard ofThisApp < configuration.maxQueuedPerApp else {
                promise.fail(Refusal.appQueueFull(waiting: ofThisApp))
                return
            }
        }
        var record = AcceptedPush(
            acceptanceID: nextAcceptanceID(),
            deviceID: device.id,
            push: push,
            acceptedAt: now,
            expiresAt: expiresAt,
            seq: nil
        )
        record.push.topic = registration.topic  // the shard's copy (equal, checked above)
        let nowOrNever = expiration == .immediately
        guard let acceptance = scheduler.accept(SchedulerPush(record, app: app, nowOrNever: nowOrNever), now: now)
        else {
            promise.fail(Refusal(.internalServerError, "the scheduler does not know this registration"))
            return
        }

        // Usually an enqueue, now and then a seq reservation, and one entry: room for them up
        // front instead of growing the arrays on the way.
        var commands: [StoreCommand] = []
        commands.reserveCapacity(2)
        var entries: [QueuedEntry] = []
        entries.reserveCapacity(1)
        let disposition: Disposition
        // Stored pushes this one replaces (same collapse id): they leave the queue once the
        // commit that removes them from disk succeeds. Taken out now, a failed commit would
        // leave them on disk but out of the queue, undelivered until a restart.
        var replacing: Set<UInt64> = []
        switch acceptance.disposition {
        case .discarded:
            counters.recordDisposition(.discarded)
            promise.succeed(.discarded)
            forget(acceptance.drops, into: &commands)
            finish(commands, entries: []) { _ in }
            return
        case .stored:
            if let collapseID = record.push.collapseID {
                // The newest push with a collapse id replaces the stored one (APNs keeps one).
                // Only one never written: one sent on an earlier stream waits for its ack, and
                // the device may be handling it, so answering `coalesced` would be untrue (both
                // would be redelivered) and nothing would be counted.
                let unsent = device.queue.dropFirst(device.deliveredCount)
                for entry in unsent
                where !entry.sent && entry.committed && entry.record.push.deviceToken == record.push.deviceToken
                    && entry.record.push.collapseID == collapseID
                {
                    replacing.insert(entry.record.acceptanceID)
                }
                if !replacing.isEmpty { commands.append(.remove(acceptanceIDs: replacing.sorted())) }
            }
            record.seq = takeSeq(device, into: &commands)
            commands.append(.enqueue(record))
            entries.append(enqueue(record, delivery: .stored, on: device))
            disposition = replacing.isEmpty ? .stored : .coalesced
        case .held, .coalesced:
            commands.append(.enqueue(record))
            held[record.acceptanceID] = record
            if let observer, observer.isListening {
                heldUnannounced[record.acceptanceID] = (record, acceptance.emptyBudget)
            }
            enteredMemory(record)
            device.heldCount += 1
            disposition = acceptance.disposition
        case .delivered:
            // In acceptance order: what was held rides ahead of the push that woke the device.
            for release in acceptance.releases {
                if release.id == record.acceptanceID {
                    record.seq = takeSeq(device, into: &commands)
                    commands.append(.enqueue(record))
                    entries.append(enqueue(record, delivery: .immediate, on: device))
                } else {
                    releaseHeld(release, carrierAPNsID: record.push.apnsID, into: &commands, entries: &entries)
                }
            }
            disposition = .delivered
        }
        let dropped = forget(acceptance.drops, into: &commands)
        let acceptanceID = record.acceptanceID
        let emptyBudget = acceptance.emptyBudget
        finish(commands, entries: entries) { [self] result in
            switch result {
            case .success:
                if !replacing.isEmpty {
                    // One sent meanwhile (the device connected) stays for its ack: its row is
                    // gone, so it is not sent again after a restart, as the collapse intends.
                    let replaced = removeUndelivered(from: device) { replacing.contains($0.record.acceptanceID) }
                    dropQueued(replaced, .coalesced)
                    queueShrank(device)
                }
                counters.recordDisposition(disposition)
                if let emptyBudget { counters.budgetExhausted.add(emptyBudget) }
                if disposition == .held || disposition == .coalesced { announceHeld(acceptanceID) }
                promise.succeed(disposition)
            case .failure(let error):
                heldUnannounced[acceptanceID] = nil
                if let record = held.removeValue(forKey: acceptanceID) {
                    leftMemory(record)
                    device.heldCount -= 1
                    scheduler.withdrawHeld(id: acceptanceID, app: app)
                    armSchedulerTimer()
                }
                // Held pushes this one pushed out (coalesced, or over the held limit) are still
                // on disk: held again here rather than only after a restart.
                for record in dropped { holdAgain(record) }
                promise.fail(Refusal.notificationNotStored(error))
            }
        }
    }

    /// Why a push was held, in a few words, for the admin stream.
    static func holdDetail(_ record: AcceptedPush, emptyBudget: BudgetScope?) -> String {
        if let emptyBudget { return "\(emptyBudget.rawValue) budget empty" }
        switch (record.push.pushType.pushClass, record.push.priority) {
        case (_, .low): return "priority 1: waits for a wake event"
        case (.silent, _): return "silent: waits for its budget or a wake event"
        case (.regular, _): return "priority 5: deferred"
        }
    }
}
