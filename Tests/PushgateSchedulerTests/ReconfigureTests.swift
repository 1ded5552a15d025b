import PushgateModel
import Testing

@testable import PushgateScheduler

/// A new policy for a running scheduler (a configuration reload): used tokens stay used, the new
/// rate applies from the reload on, held pushes meet the new limits at once, nothing is dropped
/// by the reload itself.
@Suite struct ReconfigureTests {
    static func policy(
        appBurst: Int = 3,
        appRefillPerHour: Int = 3,
        maxHeldPerApp: Int = 8,
        maxDeferralMillis: Int64 = 15 * minute
    ) -> SchedulerConfiguration {
        SchedulerConfiguration(
            global: SchedulerPolicy(
                appBurst: appBurst,
                appRefillPerHour: appRefillPerHour,
                maxHeldPerApp: maxHeldPerApp,
                maxDeferralMillis: maxDeferralMillis
            )
        )
    }

    @Test func aSmallerBurstHoldsWhatTheOldOneWouldHaveDelivered() throws {
        let harness = try Harness()
        let app = harness.app()
        #expect(harness.silent(app, now: t0).acceptance.disposition == .delivered)
        // One of three used; of a burst of two, one is left.
        #expect(try harness.reconfigure(Self.policy(appBurst: 2), now: t0).isEmpty)
        #expect(harness.scheduler.bucket(app: app, now: t0)?.wholeTokens == 1)
        #expect(harness.silent(app, now: t0).acceptance.disposition == .delivered)
        let refused = harness.silent(app, now: t0).acceptance
        #expect(refused.disposition == .held && refused.emptyBudget == .app)
    }

    @Test func aLargerBurstReleasesHeldPushesAtOnce() throws {
        let harness = try Harness()
        let app = harness.app()
        let first = harness.exhaust(app, now: t0).held
        let more = (0..<2).map { _ in harness.silent(app, now: t0).id }
        // Three of three used; a burst of five leaves two: the two oldest held go now.
        let output = try harness.reconfigure(Self.policy(appBurst: 5), now: t0 + 1)
        #expect(
            output.releases
                == [first, more[0]].map { Release(id: $0, device: harness.device, app: app, kind: .budget) }
        )
        #expect(harness.scheduler.heldIDs(app: app) == [more[1]])
    }

    @Test func aNewRateAppliesFromTheReloadOnNotBefore() throws {
        let harness = try Harness()
        let app = harness.app()
        let held = harness.exhaust(app, now: t0).held
        #expect(harness.scheduler.nextDeadline == t0 + 20 * minute)
        // Half a token refilled at 3 an hour by then is kept; the other half comes at 1 an hour.
        #expect(try harness.reconfigure(Self.policy(appRefillPerHour: 1), now: t0 + 10 * minute).isEmpty)
        #expect(harness.scheduler.nextDeadline == t0 + 40 * minute)
        #expect(harness.scheduler.advance(now: t0 + 40 * minute - 1).isEmpty)
        #expect(harness.scheduler.advance(now: t0 + 40 * minute).releases.ids == [held])
    }

    @Test func onlyBucketsARestartWouldSeeDifferentlyAreRewritten() throws {
        let harness = try Harness()
        let idle = harness.app("com.example.idle")
        let busy = harness.app("com.example.busy")
        #expect(harness.silent(busy, now: t0).acceptance.disposition == .delivered)
        _ = harness.scheduler.drainDirtyBuckets()
        #expect(try harness.reconfigure(Self.policy(appBurst: 6), now: t0 + minute).isEmpty)
        #expect(harness.scheduler.bucket(app: idle, now: t0 + minute)?.wholeTokens == 6)
        #expect(harness.scheduler.bucket(app: busy, now: t0 + minute)?.wholeTokens == 5)
        // The idle app's bucket (full either way) and the device's (same size and rate) read the
        // same from the store.
        let dirty = harness.scheduler.drainDirtyBuckets()
        #expect(dirty.apps.map(\.handle) == [busy] && dirty.devices.isEmpty)
        #expect(dirty.apps.first?.bucket.at == t0 + minute)
        // The same configuration again changes nothing.
        #expect(try harness.reconfigure(Self.policy(appBurst: 6), now: t0 + 2 * minute).isEmpty)
        #expect(harness.scheduler.drainDirtyBuckets().isEmpty)
    }

    @Test func deferralsEndAtAcceptancePlusTheNewMaximum() throws {
        let harness = try Harness()
        let app = harness.app()
        _ = harness.scheduler.setPower(harness.device, .idle, now: t0)
        let deferred = harness.regular(app, .normal, now: t0)
        #expect(deferred.acceptance.disposition == .held)
        #expect(try harness.reconfigure(Self.policy(maxDeferralMillis: 10 * minute), now: t0 + minute).isEmpty)
        #expect(harness.scheduler.nextDeadline == t0 + 10 * minute)
        // A maximum that has already passed releases it with the reload.
        let output = try harness.reconfigure(Self.policy(maxDeferralMillis: 2 * minute), now: t0 + 5 * minute)
        #expect(output.releases == [Release(id: deferred.id, device: harness.device, app: app, kind: .budget)])
    }

    @Test func appsTakeTheirTopicsNewOverride() throws {
        let harness = try Harness()
        let news = harness.app("com.example.news")
        let other = harness.app("com.example.other")
        #expect(harness.silent(news, now: t0).acceptance.disposition == .delivered)
        var configuration = Self.policy()
        configuration.topics["com.example.news"] = TopicPolicyOverride(appBurst: 1)
        #expect(try harness.reconfigure(configuration, now: t0).isEmpty)
        #expect(harness.scheduler.policy(of: news)?.appBurst == 1)
        #expect(harness.scheduler.policy(of: other)?.appBurst == 3)
        #expect(harness.silent(news, now: t0).acceptance.disposition == .held)
        // Without the override the app is back on the global policy: 3, of which 1 used.
        let output = try harness.reconfigure(Self.policy(), now: t0)
        #expect(harness.scheduler.policy(of: news)?.appBurst == 3)
        #expect(output.releases.ids.count == 1)
    }

    @Test func aLowerHeldLimitDropsNothingUntilTheAppsNextPush() throws {
        let harness = try Harness()
        let app = harness.app()
        let first = harness.exhaust(app, now: t0).held
        let more = (0..<4).map { _ in harness.silent(app, now: t0).id }
        #expect(try harness.reconfigure(Self.policy(maxHeldPerApp: 2), now: t0).isEmpty)
        #expect(harness.scheduler.heldCount(app: app) == 5)
        let next = harness.silent(app, now: t0)
        #expect(next.acceptance.drops.ids == [first] + more.prefix(3))
        #expect(next.acceptance.drops.reasons == Array(repeating: .overflow, count: 4))
        #expect(harness.scheduler.heldIDs(app: app) == [more[3], next.id])
    }

    @Test func anInvalidConfigurationIsRefusedAndChangesNothing() throws {
        let harness = try Harness()
        let app = harness.app()
        #expect(throws: SchedulerConfigurationError(topic: nil, field: "appBurst", value: 0, allowed: 1...1000)) {
            try harness.reconfigure(Self.policy(appBurst: 0), now: t0)
        }
        #expect(harness.scheduler.configuration == SchedulerConfiguration())
        #expect(harness.scheduler.policy(of: app)?.appBurst == 3)
    }
}
