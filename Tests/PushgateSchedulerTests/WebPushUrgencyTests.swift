import PushgateModel
import Testing

@testable import PushgateScheduler

/// Web Push urgency against the device's power state (RFC 8030 section 5.3): nothing below the
/// urgency the state allows is delivered, not even riding along with a wake event.
@Suite struct WebPushUrgencyTests {
    @Test("the power states map onto RFC 8030's table: awake takes every urgency, idle low and above, lowPower high")
    func mapping() {
        #expect(DevicePower.awake.minimumUrgency == .veryLow)
        #expect(DevicePower.idle.minimumUrgency == .low)
        #expect(DevicePower.lowPower.minimumUrgency == .high)
        #expect(WebPushUrgency.allCases.map(\.pushClass) == [.silent, .silent, .regular, .regular])
    }

    @Test("lowPower: low is held, a high one is delivered without it riding along, awake releases it")
    func lowIsNotPiggybackedOnHigh() throws {
        let harness = try Harness()
        let app = harness.app()
        _ = harness.scheduler.setPower(harness.device, .lowPower, now: t0)
        let low = harness.webPush(app, .low, now: t0)
        #expect(low.acceptance.disposition == .held)
        let high = harness.webPush(app, .high, now: t0 + second)
        #expect(high.acceptance.disposition == .delivered)
        #expect(high.acceptance.releases.ids == [high.id])
        // Nor a keep-alive, nor an APNs priority-10 push.
        #expect(harness.scheduler.keepalive(harness.device, now: t0 + 2 * second).releases.isEmpty)
        let apns = harness.regular(app, .high, now: t0 + 3 * second)
        #expect(apns.acceptance.releases.ids == [apns.id])
        #expect(harness.scheduler.heldIDs(app: app) == [low.id])
        // Budget is not what it waits for.
        #expect(harness.scheduler.advance(now: t0 + day).releases.isEmpty)
        let awake = harness.scheduler.setPower(harness.device, .awake, now: t0 + day)
        #expect(awake.releases.ids == [low.id])
        #expect(awake.releases.kinds == [.online])
    }

    @Test("lowPower: normal waits for the state; idle releases it at once (budget), with low left to its budget")
    func leavingLowPowerReleasesWhatItAllows() throws {
        let harness = try Harness()
        let app = harness.app()
        _ = harness.scheduler.setPower(harness.device, .lowPower, now: t0)
        let normal = harness.webPush(app, .normal, now: t0)
        let low = harness.webPush(app, .low, now: t0)
        let veryLow = harness.webPush(app, .veryLow, now: t0)
        #expect([normal, low, veryLow].map(\.acceptance.disposition) == [.held, .held, .held])
        let idle = harness.scheduler.setPower(harness.device, .idle, now: t0 + second)
        #expect(idle.releases.ids == [normal.id])
        #expect(idle.releases.kinds == [.budget])
        // low waits for budget (the bucket is full: due now); very-low for the state.
        #expect(harness.scheduler.nextDeadline! <= t0 + second)
        let budget = harness.scheduler.advance(now: t0 + second)
        #expect(budget.releases.ids == [low.id])
        #expect(budget.releases.kinds == [.budget])
        #expect(harness.scheduler.heldIDs(app: app) == [veryLow.id])
        let held = harness.scheduler.heldPushes(app: app)!
        #expect(held.map(\.waitsForPowerState) == [true])
        // No budget timer spins for a message the state does not allow.
        #expect(harness.scheduler.nextDeadline == nil || harness.scheduler.nextDeadline! > t0 + day)
    }

    @Test("idle: very-low is held past the budget and not piggybacked; low within budget goes at once")
    func idleHoldsVeryLow() throws {
        let harness = try Harness()
        let app = harness.app()
        _ = harness.scheduler.setPower(harness.device, .idle, now: t0)
        let veryLow = harness.webPush(app, .veryLow, now: t0)
        #expect(veryLow.acceptance.disposition == .held)
        // The held very-low message does not hold the later low one back.
        let low = harness.webPush(app, .low, now: t0)
        #expect(low.acceptance.disposition == .delivered)
        let high = harness.webPush(app, .high, now: t0 + second)
        #expect(high.acceptance.releases.ids == [high.id])
        let online = harness.scheduler.setPower(harness.device, .awake, now: t0 + 2 * second)
        #expect(online.releases.ids == [veryLow.id])
    }

    @Test("a message held for budget rides along with a high one, as silent pushes do")
    func budgetHeldIsPiggybacked() throws {
        let harness = try Harness(SchedulerConfiguration(global: fastPolicy(appBurst: 1)))
        let app = harness.app()
        let first = harness.webPush(app, .low, now: t0)
        let second = harness.webPush(app, .low, now: t0)
        #expect(first.acceptance.disposition == .delivered)
        #expect(second.acceptance.disposition == .held)
        #expect(second.acceptance.emptyBudget == .app)
        let high = harness.webPush(app, .high, now: t0 + 1)
        #expect(high.acceptance.releases.ids == [second.id, high.id])
        #expect(high.acceptance.releases.kinds == [.piggyback, .immediate])
    }

    @Test("a device with no stream holds every urgency; its connect in lowPower releases only high ones, in order")
    func offlineMessagesWaitForTheState() throws {
        let harness = try Harness(connected: false)
        let app = harness.app()
        let normal = harness.webPush(app, .normal, now: t0)
        let high = harness.webPush(app, .high, now: t0)
        let low = harness.webPush(app, .low, now: t0)
        #expect([normal, high, low].map(\.acceptance.disposition) == [.held, .held, .held])
        _ = harness.scheduler.setPower(harness.device, .lowPower, now: t0)
        let connect = harness.scheduler.connect(harness.device, now: t0 + second)
        #expect(connect.releases.ids == [high.id])
        let awake = harness.scheduler.setPower(harness.device, .awake, now: t0 + 2 * second)
        #expect(awake.releases.ids == [normal.id, low.id])
    }

    @Test("a Topic replaces the held message of that topic whatever its urgency, delivered or held")
    func topicReplacesAcrossUrgencies() throws {
        let harness = try Harness()
        let app = harness.app()
        _ = harness.scheduler.setPower(harness.device, .lowPower, now: t0)
        let low = harness.webPush(app, .low, topic: "news", now: t0)
        let normal = harness.webPush(app, .normal, topic: "news", now: t0)
        #expect(normal.acceptance.disposition == .coalesced)
        #expect(normal.acceptance.drops.ids == [low.id])
        #expect(normal.acceptance.drops.reasons == [.coalesced])
        let high = harness.webPush(app, .high, topic: "news", now: t0)
        #expect(high.acceptance.disposition == .delivered)
        #expect(high.acceptance.drops.ids == [normal.id])
        #expect(harness.scheduler.heldIDs(app: app) == [])
    }

    @Test("TTL 0: delivered when the device takes it now, else discarded")
    func nowOrNever() throws {
        let harness = try Harness()
        let app = harness.app()
        _ = harness.scheduler.setPower(harness.device, .idle, now: t0)
        #expect(harness.webPush(app, .normal, nowOrNever: true, now: t0).acceptance.disposition == .delivered)
        let veryLow = harness.webPush(app, .veryLow, nowOrNever: true, now: t0).acceptance
        #expect(veryLow.disposition == .discarded)
        #expect(veryLow.discardReason == .undeliverableNow)
        harness.scheduler.disconnect(harness.device)
        #expect(harness.webPush(app, .high, nowOrNever: true, now: t0).acceptance.disposition == .discarded)
    }

    @Test("a restored normal message has no priority-5 deferral: in lowPower it stays held")
    func restoredMessageKeepsWaiting() throws {
        let harness = try Harness()
        let app = harness.app()
        _ = harness.scheduler.setPower(harness.device, .lowPower, now: t0)
        let push = SchedulerPush(
            id: 7,
            app: app,
            pushClass: .regular,
            priority: WebPushUrgency.normal.priority,
            expiresAt: t0 + day,
            urgency: .normal
        )
        #expect(harness.scheduler.restoreHeld(push, acceptedAt: t0))
        #expect(harness.scheduler.advance(now: t0 + hour).releases.isEmpty)
        #expect(harness.scheduler.advance(now: t0 + day).drops.reasons == [.expired])
    }
}
