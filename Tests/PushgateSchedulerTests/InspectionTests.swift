import PushgateModel
import Testing

@testable import PushgateScheduler

/// What the admin view and the metrics learn from the scheduler: which budget was empty, what is
/// held and in which order, when a token comes.
@Suite struct InspectionTests {
    @Test func theEmptyBucketIsNamedTheAppsFirst() throws {
        let harness = try Harness()
        let app = harness.app()
        #expect(harness.silent(app, now: t0).acceptance.emptyBudget == nil, "delivered")
        _ = harness.exhaust(app, now: t0)
        // The device's bucket (10) outlasts three apps' (3 each); a fourth app, with tokens of
        // its own, takes its last one and then finds it empty.
        let second = harness.app("com.example.second")
        _ = harness.exhaust(second, now: t0)
        let third = harness.app("com.example.third")
        #expect(harness.silent(third, now: t0).acceptance.disposition == .delivered)
        #expect(harness.silent(third, now: t0).acceptance.disposition == .delivered)
        #expect(harness.silent(third, now: t0).acceptance.disposition == .delivered)
        let fourth = harness.app("com.example.fourth")
        #expect(harness.silent(fourth, now: t0).acceptance.disposition == .delivered)
        let deviceEmpty = harness.silent(fourth, now: t0).acceptance
        #expect(deviceEmpty.disposition == .held)
        #expect(deviceEmpty.emptyBudget == .device)
    }

    @Test func heldForAnotherReasonNamesNoBucket() throws {
        let offline = try Harness(connected: false)
        #expect(offline.silent(offline.app(), now: t0).acceptance.emptyBudget == nil, "offline")

        let lowPower = try Harness()
        let app = lowPower.app()
        _ = lowPower.scheduler.setPower(lowPower.device, .lowPower, now: t0)
        #expect(lowPower.silent(app, now: t0).acceptance.emptyBudget == nil, "lowPower")

        let behind = try Harness()
        let queued = behind.app()
        _ = behind.exhaust(queued, now: t0)
        #expect(behind.silent(queued, now: t0).acceptance.emptyBudget == nil, "behind an older held push")
    }

    @Test func heldPushesInOrderWithWhatIsAheadAndTheirDeferral() throws {
        let harness = try Harness()
        let app = harness.app()
        _ = harness.scheduler.setPower(harness.device, .idle, now: t0)
        let first = harness.exhaust(app, now: t0).held
        let second = harness.silent(app, now: t0).id
        let normal = harness.regular(app, .normal, now: t0).id
        let low = harness.regular(app, .low, now: t0).id
        let held = try #require(harness.scheduler.heldPushes(app: app))
        #expect(held.map(\.id) == [first, second, normal, low])
        #expect(held.map(\.waitsForBudget) == [true, true, false, false])
        #expect(held.map(\.ahead) == [0, 1, 0, 1])
        #expect(held.map(\.deferredUntil) == [nil, nil, t0 + 15 * minute, nil])
    }

    @Test func theNextTokenComesAtTheRefillRate() throws {
        let harness = try Harness()
        let app = harness.app()
        #expect(harness.scheduler.nextToken(app: app, now: t0) == t0, "a full bucket has one now")
        _ = harness.exhaust(app, now: t0)
        // 3 a hour: one every 20 minutes.
        #expect(harness.scheduler.nextToken(app: app, now: t0) == t0 + 20 * minute)
        #expect(harness.scheduler.nextToken(app: app, now: t0 + 5 * minute) == t0 + 20 * minute)
        // The device's 10 a hour bucket lost 3 of 10: it still has a whole one.
        #expect(harness.scheduler.nextToken(device: harness.device, now: t0) == t0)
    }

    @Test func theOldestDeferralIsTheOldestPriority5PushStillInIt() throws {
        let harness = try Harness()
        let app = harness.app()
        _ = harness.scheduler.setPower(harness.device, .idle, now: t0)
        #expect(harness.scheduler.oldestDeferredAcceptedAt() == nil)
        _ = harness.exhaust(app, now: t0)
        _ = harness.silent(app, now: t0)
        _ = harness.regular(app, .low, now: t0)
        #expect(harness.scheduler.oldestDeferredAcceptedAt() == nil, "silent and priority 1 are not deferred")
        _ = harness.regular(app, .normal, now: t0 + minute)
        _ = harness.regular(app, .normal, now: t0 + 2 * minute)
        #expect(harness.scheduler.oldestDeferredAcceptedAt() == t0 + minute)
        // Its deferral ends (15 minutes): released; the next one is the oldest.
        _ = harness.scheduler.advance(now: t0 + 16 * minute)
        #expect(harness.scheduler.oldestDeferredAcceptedAt() == t0 + 2 * minute)
        _ = harness.scheduler.advance(now: t0 + 17 * minute)
        #expect(harness.scheduler.oldestDeferredAcceptedAt() == nil)
    }
}
