import PushgateModel
import Testing

@testable import PushgateScheduler

/// Token buckets, immediate silent delivery and budget releases.
@Suite struct SilentBudgetTests {
    @Test func burstIsDeliveredAtOnceThenHeld() throws {
        let harness = try Harness()
        let app = harness.app()
        let first = harness.silent(app, now: t0)
        #expect(first.acceptance.disposition == .delivered)
        #expect(
            first.acceptance.releases == [Release(id: first.id, device: harness.device, app: app, kind: .immediate)]
        )
        #expect(harness.silent(app, now: t0).acceptance.disposition == .delivered)
        #expect(harness.silent(app, now: t0).acceptance.disposition == .delivered)
        let fourth = harness.silent(app, now: t0)
        var held = Acceptance(disposition: .held)
        held.emptyBudget = .app
        #expect(fourth.acceptance == held)
        #expect(harness.scheduler.heldIDs(app: app) == [fourth.id])
    }

    @Test func refillReleasesTheHeldPushAtExactlyTheTokenBoundary() throws {
        let harness = try Harness()
        let app = harness.app()
        let held = harness.exhaust(app, now: t0).held
        // 3 tokens per hour: the next whole token is 20 minutes after the bucket emptied.
        #expect(harness.scheduler.nextDeadline == t0 + 20 * minute)
        #expect(harness.scheduler.advance(now: t0 + 20 * minute - 1).isEmpty)
        let output = harness.scheduler.advance(now: t0 + 20 * minute)
        #expect(output.releases == [Release(id: held, device: harness.device, app: app, kind: .budget)])
        #expect(harness.scheduler.heldCount(app: app) == 0)
        #expect(harness.scheduler.bucket(app: app, now: t0 + 20 * minute)?.level == 0)
        #expect(harness.scheduler.nextDeadline == nil)
    }

    @Test func aLateAdvanceReleasesWhatTheBucketsAllowThenWaits() throws {
        let harness = try Harness()
        let app = harness.app()
        let first = harness.exhaust(app, now: t0).held
        let more = (0..<4).map { _ in harness.silent(app, now: t0 + 1).id }
        // 41 minutes later the bucket holds 2.05 tokens: the two oldest held go.
        let output = harness.scheduler.advance(now: t0 + 41 * minute)
        #expect(output.releases.ids == [first, more[0]])
        #expect(output.releases.kinds == [.budget, .budget])
        #expect(harness.scheduler.heldIDs(app: app) == Array(more[1...]))
        // The 0.05 token left over is kept: the next whole token is at 60 minutes, not 61.
        #expect(harness.scheduler.nextDeadline == t0 + 60 * minute)
    }

    @Test func burstNeverExceedsItsCapAfterALongIdle() throws {
        let harness = try Harness()
        let app = harness.app()
        #expect(harness.exhaust(app, now: t0).delivered.count == 3)
        #expect(harness.scheduler.advance(now: t0 + 20 * minute).releases.count == 1)
        let later = t0 + 10 * hour
        #expect(harness.scheduler.bucket(app: app, now: later)?.wholeTokens == 3)
        #expect(harness.scheduler.bucket(app: app, now: later)?.level == 3 * BucketSnapshot.unitsPerToken)
        #expect(harness.exhaust(app, now: later).delivered.count == 3)
    }

    @Test func deviceBucketIsSharedByAllApps() throws {
        let harness = try Harness()
        let apps = (0..<4).map { harness.app("com.example.app\($0)") }
        var delivered = 0
        for app in apps {
            for _ in 0..<3 where harness.silent(app, now: t0).acceptance.disposition == .delivered {
                delivered += 1
            }
        }
        #expect(delivered == 10)
        #expect(harness.scheduler.heldCount(device: harness.device) == 2)
        #expect(harness.scheduler.bucket(device: harness.device, now: t0)?.level == 0)
        // 10 per hour: the device's next token comes 6 minutes later and releases one held push.
        #expect(harness.scheduler.nextDeadline == t0 + 6 * minute)
        #expect(harness.scheduler.advance(now: t0 + 6 * minute).releases.count == 1)
    }

    @Test func budgetReleasesOldestAcceptanceFirstAcrossApps() throws {
        let harness = try Harness(SchedulerConfiguration(global: SchedulerPolicy(appBurst: 3, deviceBurst: 2)))
        let a = harness.app("com.example.a")
        let b = harness.app("com.example.b")
        #expect(harness.silent(a, now: t0).acceptance.disposition == .delivered)
        #expect(harness.silent(b, now: t0).acceptance.disposition == .delivered)
        let b2 = harness.silent(b, now: t0).id
        let a2 = harness.silent(a, now: t0).id
        let b3 = harness.silent(b, now: t0).id
        // The device refills one token every 6 minutes; the apps still have tokens.
        #expect(harness.scheduler.advance(now: t0 + 6 * minute).releases.ids == [b2])
        #expect(harness.scheduler.advance(now: t0 + 12 * minute).releases.ids == [a2])
        #expect(harness.scheduler.advance(now: t0 + 18 * minute).releases.ids == [b3])
    }

    @Test func anAppWithoutATokenDoesNotBlockAnother() throws {
        let configuration = SchedulerConfiguration(
            global: SchedulerPolicy(appBurst: 1, appRefillPerHour: 1, deviceBurst: 2, deviceRefillPerHour: 3600),
            topics: ["com.example.b": TopicPolicyOverride(appBurst: 2)]
        )
        let harness = try Harness(configuration)
        let a = harness.app("com.example.a")
        let b = harness.app("com.example.b")
        #expect(harness.silent(a, now: t0).acceptance.disposition == .delivered)
        let a2 = harness.silent(a, now: t0).id
        #expect(harness.silent(b, now: t0).acceptance.disposition == .delivered)
        let b2 = harness.silent(b, now: t0).id
        #expect(a2 < b2)
        let output = harness.scheduler.advance(now: t0 + second)
        #expect(output.releases.ids == [b2])
        #expect(harness.scheduler.heldIDs(app: a) == [a2])
    }

    @Test func anAppWithHeldPushesQueuesNewOnesEvenWithTokens() throws {
        // Tokens come back at 1/s; the held push waits for `advance`, and a newer push must not
        // overtake it.
        let harness = try Harness(SchedulerConfiguration(global: fastPolicy(appBurst: 1)))
        let app = harness.app()
        let held = harness.exhaust(app, now: t0).held
        let newer = harness.silent(app, now: t0 + 5 * second)
        #expect(newer.acceptance.disposition == .held)
        let output = harness.scheduler.advance(now: t0 + 5 * second)
        #expect(output.releases.ids == [held])
        #expect(harness.scheduler.advance(now: t0 + 6 * second).releases.ids == [newer.id])
    }

    @Test func lowPowerBlocksBudgetReleasesButNotWakeEvents() throws {
        let harness = try Harness()
        let app = harness.app()
        let held = harness.exhaust(app, now: t0).held
        _ = harness.scheduler.setPower(harness.device, .lowPower, now: t0)
        // Only the held push's expiry is pending; no budget timer.
        #expect(harness.scheduler.nextDeadline == t0 + 30 * day)
        #expect(harness.scheduler.advance(now: t0 + 2 * hour).isEmpty)
        #expect(harness.scheduler.heldIDs(app: app) == [held])
        let output = harness.scheduler.keepalive(harness.device, now: t0 + 2 * hour)
        #expect(output.releases == [Release(id: held, device: harness.device, app: app, kind: .keepalive)])
    }

    @Test func leavingLowPowerResumesBudgetReleases() throws {
        let harness = try Harness()
        let app = harness.app()
        let held = harness.exhaust(app, now: t0).held
        _ = harness.scheduler.setPower(harness.device, .lowPower, now: t0)
        #expect(harness.scheduler.setPower(harness.device, .idle, now: t0 + hour).isEmpty)
        // The token came back long ago: due at once.
        #expect(harness.scheduler.nextDeadline == t0 + 20 * minute)
        #expect(harness.scheduler.advance(now: t0 + hour).releases.ids == [held])
    }

    @Test func lowPowerHoldsSilentPushesEvenWithinBudget() throws {
        let harness = try Harness()
        let app = harness.app()
        _ = harness.scheduler.setPower(harness.device, .lowPower, now: t0)
        let pushed = harness.silent(app, now: t0)
        #expect(pushed.acceptance.disposition == .held)
        #expect(harness.scheduler.bucket(app: app, now: t0)?.wholeTokens == 3, "no budget taken")
        let output = harness.scheduler.keepalive(harness.device, now: t0 + second)
        #expect(output.releases == [Release(id: pushed.id, device: harness.device, app: app, kind: .keepalive)])
    }

    @Test func disconnectedDeviceHoldsAndTakesNoBudget() throws {
        let harness = try Harness(connected: false)
        let app = harness.app()
        let held = harness.silent(app, now: t0)
        #expect(held.acceptance.disposition == .held)
        #expect(harness.scheduler.nextDeadline == t0 + 30 * day)
        #expect(harness.scheduler.advance(now: t0 + hour).isEmpty)
        #expect(harness.scheduler.bucket(app: app, now: t0 + hour)?.wholeTokens == 3)
        let output = harness.scheduler.connect(harness.device, now: t0 + hour)
        #expect(output.releases == [Release(id: held.id, device: harness.device, app: app, kind: .online)])
        #expect(harness.scheduler.bucket(app: app, now: t0 + hour)?.wholeTokens == 3)
    }

    @Test func disconnectStopsBudgetReleases() throws {
        let harness = try Harness()
        let app = harness.app()
        let held = harness.exhaust(app, now: t0).held
        harness.scheduler.disconnect(harness.device)
        #expect(harness.scheduler.advance(now: t0 + hour).isEmpty)
        #expect(harness.scheduler.heldIDs(app: app) == [held])
    }

    @Test func bucketsRefillExactlyWithRatesThatDoNotDivideAnHour() throws {
        // 7 per hour: a token every 514,285.71 ms. Levels are kept in 1/3,600,000 token, so the
        // k-th token is whole at exactly ceil(k × 3,600,000 / 7) ms and no fraction is lost over a
        // long run. (Burst 2, so that the bucket is never full when a token is taken: a full
        // bucket rightly discards what it cannot hold.)
        let harness = try Harness(
            SchedulerConfiguration(
                global: SchedulerPolicy(appBurst: 2, appRefillPerHour: 7, deviceBurst: 1000, maxHeldPerApp: 100)
            )
        )
        let app = harness.app()
        _ = harness.exhaust(app, now: t0)
        #expect(harness.scheduler.nextDeadline == t0 + 514_286)
        for _ in 0..<70 { _ = harness.silent(app, now: t0) }
        var released: [Int64] = []
        while let due = harness.scheduler.nextDeadline, due <= t0 + 10 * hour {
            released += harness.scheduler.advance(now: due).releases.map { _ in due - t0 }
        }
        #expect(released.count == 70)
        #expect(released.enumerated().allSatisfy { index, at in at == (Int64(index + 1) * 3_600_000 + 6) / 7 })
        #expect(released.last == 10 * hour)
        #expect(harness.scheduler.heldCount(app: app) == 1)
    }
}
