import PushgateModel
import Testing

@testable import PushgateScheduler

/// Regular pushes by priority, storage while offline, `apns-expiration: 0`.
@Suite struct PriorityTests {
    @Test func priority5IsDeliveredAtOnceWhenAwake() throws {
        let harness = try Harness()
        let app = harness.app()
        let push = harness.regular(app, .normal, now: t0)
        #expect(push.acceptance.releases == [Release(id: push.id, device: harness.device, app: app, kind: .immediate)])
    }

    @Test(arguments: [DevicePower.idle, .lowPower])
    func priority5IsReleasedByBudgetAtMaxDeferral(power: DevicePower) throws {
        let harness = try Harness()
        let app = harness.app()
        _ = harness.scheduler.setPower(harness.device, power, now: t0)
        let push = harness.regular(app, .normal, now: t0)
        #expect(push.acceptance.disposition == .held)
        #expect(harness.scheduler.nextDeadline == t0 + 15 * minute)
        #expect(harness.scheduler.advance(now: t0 + 15 * minute - 1).isEmpty)
        let output = harness.scheduler.advance(now: t0 + 15 * minute)
        #expect(output.releases == [Release(id: push.id, device: harness.device, app: app, kind: .budget)])
    }

    @Test func priority5UsesTheTopicsMaxDeferral() throws {
        let harness = try Harness(
            SchedulerConfiguration(topics: ["com.example.chat": TopicPolicyOverride(maxDeferralMillis: 30 * second)])
        )
        let app = harness.app("com.example.chat")
        _ = harness.scheduler.setPower(harness.device, .idle, now: t0)
        _ = harness.regular(app, .normal, now: t0)
        #expect(harness.scheduler.nextDeadline == t0 + 30 * second)
    }

    @Test func priority5ThatRunsOutOfDeferralWhileOfflineWaitsForTheReconnect() throws {
        let harness = try Harness()
        let app = harness.app()
        _ = harness.scheduler.setPower(harness.device, .idle, now: t0)
        let push = harness.regular(app, .normal, now: t0).id
        harness.scheduler.disconnect(harness.device)
        #expect(harness.scheduler.advance(now: t0 + hour).isEmpty)
        #expect(harness.scheduler.heldIDs(app: app) == [push])
        let output = harness.scheduler.connect(harness.device, now: t0 + 2 * hour)
        #expect(output.releases.ids == [push])
        #expect(output.releases.kinds == [.online])
    }

    @Test func priority5IsReleasedEarlyByAWakeEvent() throws {
        let harness = try Harness()
        let app = harness.app()
        _ = harness.scheduler.setPower(harness.device, .idle, now: t0)
        let push = harness.regular(app, .normal, now: t0).id
        #expect(harness.scheduler.keepalive(harness.device, now: t0 + minute).releases.ids == [push])
        #expect(harness.scheduler.advance(now: t0 + hour).isEmpty)
    }

    @Test func priority1WaitsForAWakeEventEvenWhenAwake() throws {
        let harness = try Harness()
        let app = harness.app()
        let push = harness.regular(app, .low, now: t0)
        #expect(push.acceptance.disposition == .held)
        // Its only timer is its expiry, 30 days on.
        #expect(harness.scheduler.nextDeadline == t0 + 30 * day)
        #expect(harness.scheduler.advance(now: t0 + 29 * day).isEmpty)
        let output = harness.scheduler.keepalive(harness.device, now: t0 + 29 * day)
        #expect(output.releases == [Release(id: push.id, device: harness.device, app: app, kind: .keepalive)])
    }

    @Test(
        "a silent push at priority 1 never wakes the device: held with budget left, not released by budget, taking none; the next wake event brings it"
    )
    func silentPriority1WaitsForAWakeEvent() throws {
        let harness = try Harness()
        let app = harness.app()
        let push = harness.push(app, .silent, priority: .low, now: t0)
        #expect(push.acceptance.disposition == .held)
        #expect(harness.scheduler.heldPushes(app: app)?.map(\.waitsForBudget) == [false])
        #expect(harness.scheduler.advance(now: t0 + 29 * day).isEmpty)
        // Its app's budget is whole: the silent pushes after it go at once, around it.
        let next = harness.silent(app, now: t0 + 29 * day)
        #expect(next.acceptance.releases.ids == [next.id])
        let output = harness.scheduler.keepalive(harness.device, now: t0 + 29 * day)
        #expect(output.releases == [Release(id: push.id, device: harness.device, app: app, kind: .keepalive)])
    }

    @Test(arguments: [PushPriority.high, .normal, .low])
    func regularPushesForAnOfflineDeviceAreStored(priority: PushPriority) throws {
        let harness = try Harness(connected: false)
        let app = harness.app()
        let push = harness.regular(app, priority, now: t0)
        #expect(push.acceptance == Acceptance(disposition: .stored))
        #expect(harness.scheduler.heldCount(device: harness.device) == 0)
    }

    @Test func storedPriority10IsNoWakeEvent() throws {
        let harness = try Harness(connected: false)
        let app = harness.app()
        let held = harness.silent(app, now: t0).id
        _ = harness.regular(app, .high, now: t0)
        #expect(harness.scheduler.heldIDs(app: app) == [held])
    }

    @Test func nowOrNeverSilentIsDeliveredWithinBudgetElseDiscarded() throws {
        let harness = try Harness()
        let app = harness.app()
        #expect(harness.silent(app, nowOrNever: true, now: t0).acceptance.disposition == .delivered)
        _ = harness.exhaust(app, now: t0)
        let late = harness.silent(app, nowOrNever: true, now: t0)
        #expect(late.acceptance == Acceptance.discarded(.undeliverableNow))
        #expect(harness.scheduler.heldIDs(app: app)?.contains(late.id) == false)
    }

    @Test func nowOrNeverRegular() throws {
        let harness = try Harness()
        let app = harness.app()
        _ = harness.scheduler.setPower(harness.device, .idle, now: t0)
        #expect(harness.regular(app, .high, nowOrNever: true, now: t0).acceptance.disposition == .delivered)
        #expect(
            harness.regular(app, .normal, nowOrNever: true, now: t0).acceptance.discardReason == .undeliverableNow
        )
        #expect(
            harness.regular(app, .low, nowOrNever: true, now: t0).acceptance.discardReason == .undeliverableNow
        )
        harness.scheduler.disconnect(harness.device)
        #expect(
            harness.regular(app, .high, nowOrNever: true, now: t0).acceptance.discardReason == .undeliverableNow
        )
        #expect(harness.silent(app, nowOrNever: true, now: t0).acceptance.discardReason == .undeliverableNow)
        #expect(harness.scheduler.heldCount(device: harness.device) == 0)
    }
}
