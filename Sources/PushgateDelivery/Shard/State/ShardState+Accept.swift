import PushgateModel
import PushgateScheduler
import PushgateStore

// A provider push, from its registration to its plan.
extension ShardState {
    /// What `push` becomes: refused, answered at once, or a plan to carry out, applied to memory
    /// already (held, queued, or releasing what waited for it).
    func accept(_ push: Push, expiration: Expiration) -> AcceptanceDecision {
        // A Web Push subscription's token takes Web Push messages only, at its endpoint.
        guard let registration = registrations[push.deviceToken], registration.kind == .apns else {
            return .refused(Refusal.unknownDeviceToken(push.deviceToken))
        }
        // The topic first, and named alone: a provider pushing to another app's token learns
        // neither that app's topic nor when it was unregistered.
        guard registration.topic == push.topic else {
            return .refused(Refusal(.deviceTokenNotForTopic, "the token is not registered for \(push.topic)"))
        }
        // Checked before the device: a deleted device's tokens are unregistered, not unknown.
        if let at = registration.unregisteredAt {
            return .refused(Refusal(.unregistered, "the token was unregistered; stop sending to it", timestamp: at))
        }
        guard let device = devices[registration.deviceID] else {
            return .refused(Refusal.unknownDeviceToken(push.deviceToken))
        }
        return plan(push, expiration: expiration, registration: registration, device: device)
    }

    /// A Web Push message to an endpoint, in the contract's order: the subscription (404, 410),
    /// the message's own rules (400, 413, found by its route), VAPID against the
    /// subscription's key (401, 403), then as a provider push (429, or a plan).
    func accept(_ submission: WebPushSubmission) -> AcceptanceDecision {
        guard let registration = registrations[submission.token], registration.kind == .webpush else {
            return .refused(Refusal(.notFound, "no subscription has this endpoint"))
        }
        if let at = registration.unregisteredAt {
            return .refused(Refusal(.unregistered, "the subscription was deleted; stop sending to it", timestamp: at))
        }
        guard let device = devices[registration.deviceID] else {
            return .refused(Refusal(.notFound, "no subscription has this endpoint"))
        }
        let message: WebPushMessage
        switch submission.message {
        case .failure(let refusal): return .refused(refusal)
        case .success(let accepted): message = accepted
        }
        switch (registration.applicationServerKey, submission.vapid) {
        case (_, .invalid(let refusal)):
            return .refused(refusal)
        case (.some, .absent):
            return .refused(
                Refusal(
                    .vapidRequired,
                    "the subscription is restricted to an application server key: send authorization: vapid t=<JWT>, k=<that key> (RFC 8292)"
                )
            )
        case (.some(let key), .valid(let signer)) where signer != key:
            return .refused(
                Refusal(.badJwtToken, "k is not the application server key the subscription is restricted to")
            )
        default:
            return plan(message.push, expiration: message.expiration, registration: registration, device: device)
        }
    }

    /// A push whose registration and device are known: room for it, then the scheduler's
    /// decision as a plan.
    private func plan(
        _ push: Push,
        expiration: Expiration,
        registration: RegistrationState,
        device: DeviceState
    ) -> AcceptanceDecision {
        guard let app = registration.app else {
            return .refused(Refusal(.internalServerError, "registration \(push.deviceToken) has no scheduler state"))
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
            if expiresAt <= now { return .answered(.discarded, ShardPlan()) }
        case .lifetime(let seconds):
            expiresAt = now + min(max(seconds, 1), configuration.maxExpirationMillis / 1000) * 1000
        }
        if let refusal = roomRefusal(for: push, on: device) { return .refused(refusal) }
        var record = AcceptedPush(
            acceptanceID: nextAcceptanceID(),
            deviceID: device.id,
            push: push,
            acceptedAt: now,
            expiresAt: expiresAt,
            seq: nil
        )
        // The shard's copy (an APNs push named it, checked above); a Web Push message takes its
        // subscription's name.
        record.push.topic = registration.topic
        let nowOrNever = expiration == .immediately
        guard let acceptance = scheduler.accept(SchedulerPush(record, app: app, nowOrNever: nowOrNever), now: now)
        else {
            return .refused(Refusal(.internalServerError, "the scheduler does not know this registration"))
        }

        var plan = ShardPlan()
        // Usually an enqueue, now and then a seq reservation, and one entry: room for them up
        // front instead of growing the arrays on the way.
        plan.commands.reserveCapacity(2)
        plan.entries.reserveCapacity(1)
        var replacing: Set<UInt64> = []
        switch acceptance.disposition {
        case .discarded:
            dropHeld(acceptance.drops, into: &plan)
            return .answered(.discarded, plan)
        case .stored:
            replacing = storedReplaced(by: record, on: device)
            if !replacing.isEmpty { plan.commands.append(.remove(acceptanceIDs: replacing.sorted())) }
            record.seq = takeSeq(device, into: &plan)
            plan.commands.append(.enqueue(record))
            enqueue(record, delivery: .stored, on: device, into: &plan)
        case .held, .coalesced:
            plan.commands.append(.enqueue(record))
            held[record.acceptanceID] = record
            if let observer, observer.isListening {
                heldUnannounced[record.acceptanceID] = (record, acceptance.emptyBudget)
            }
            enteredMemory(record)
            device.heldCount += 1
            plan.restorations.append(.unhold(acceptanceID: record.acceptanceID, app: app))
        case .delivered:
            // In acceptance order: what was held rides ahead of the push that woke the device.
            for release in acceptance.releases {
                if release.id == record.acceptanceID {
                    record.seq = takeSeq(device, into: &plan)
                    plan.commands.append(.enqueue(record))
                    enqueue(record, delivery: .immediate, on: device, into: &plan)
                } else {
                    self.release(release, carrierAPNsID: record.push.apnsID, into: &plan)
                }
            }
        }
        // Held pushes this one pushed out (coalesced, or over the held limit) are still on disk
        // if its commit fails: held again then, rather than only after a restart.
        plan.restorations += dropHeld(acceptance.drops, into: &plan).map(Restoration.hold)
        var disposition = acceptance.disposition
        if disposition == .stored, !replacing.isEmpty { disposition = .coalesced }
        return .planned(
            AcceptancePlan(
                plan: plan,
                disposition: disposition,
                deviceID: device.id,
                acceptanceID: record.acceptanceID,
                replacing: replacing,
                emptyBudget: acceptance.emptyBudget
            )
        )
    }

    /// The plan committed: the stored pushes it replaced leave the queue (one sent meanwhile, as
    /// the device connected, stays for its ack: its row is gone, so it is not sent again after a
    /// restart, as the collapse intends), and the push is counted and announced.
    func confirm(_ acceptance: AcceptancePlan) -> [DeviceState] {
        let touched = confirm(acceptance.plan)
        if !acceptance.replacing.isEmpty, let device = devices[acceptance.deviceID] {
            let replaced = takeUndelivered(from: device) { acceptance.replacing.contains($0.record.acceptanceID) }
            counters.recordDrop(.coalesced, count: replaced.count)
            for record in replaced { announceDrop(record, .coalesced) }
            queueShrank(device)
        }
        counters.recordDisposition(acceptance.disposition)
        if let emptyBudget = acceptance.emptyBudget { counters.budgetExhausted.add(emptyBudget) }
        if acceptance.disposition == .held || acceptance.disposition == .coalesced {
            announceHeld(acceptance.acceptanceID)
        }
        return touched
    }

    /// Why the gateway cannot take another push for this device, if it cannot: the memory budget
    /// of all queues, the device's queue, the app's share of it.
    private func roomRefusal(for push: Push, on device: DeviceState) -> Refusal? {
        guard queuedBudget.fits(QueuedNotificationBudget.cost(payloadBytes: push.payload.count)) else {
            return Refusal.gatewayQueuesFull(megabytes: queuedBudget.limit >> 20)
        }
        let waiting = device.queue.count + device.heldCount
        guard waiting < configuration.maxQueuedPerDevice else { return Refusal.deviceQueueFull(waiting: waiting) }
        // Counted only when the device holds enough for one app to be at its limit: a scan of
        // the queue, never on the usual path.
        if waiting >= configuration.maxQueuedPerApp {
            var ofThisApp = 0
            for entry in device.queue where entry.record.push.deviceToken == push.deviceToken { ofThisApp += 1 }
            guard ofThisApp < configuration.maxQueuedPerApp else { return Refusal.appQueueFull(waiting: ofThisApp) }
        }
        return nil
    }

    /// Stored pushes a newer one with the same collapse id replaces (APNs keeps one): only those
    /// never written. One sent on an earlier stream waits for its ack, and the device may be
    /// handling it, so answering `coalesced` would be untrue (both would be redelivered).
    private func storedReplaced(by record: AcceptedPush, on device: DeviceState) -> Set<UInt64> {
        guard let collapseID = record.push.collapseID else { return [] }
        var replacing: Set<UInt64> = []
        for entry in device.queue.dropFirst(device.deliveredCount)
        where !entry.sent && entry.committed && entry.record.push.deviceToken == record.push.deviceToken
            && entry.record.push.collapseID == collapseID
        {
            replacing.insert(entry.record.acceptanceID)
        }
        return replacing
    }
}
