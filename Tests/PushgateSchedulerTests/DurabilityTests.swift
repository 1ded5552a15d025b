import PushgateModel
import Testing

@testable import PushgateScheduler

/// Bucket snapshots, dirty tracking and restoring held pushes after a restart.
@Suite struct DurabilityTests {
    @Test func dirtyBucketsReportEachChangedBucketOnce() throws {
        let harness = try Harness()
        let app = harness.app()
        let idle = harness.app("com.example.idle")
        #expect(harness.scheduler.drainDirtyBuckets().isEmpty)
        _ = harness.silent(app, now: t0)
        _ = harness.silent(app, now: t0 + 5)
        let dirty = harness.scheduler.drainDirtyBuckets()
        let unit = BucketSnapshot.unitsPerToken
        #expect(
            dirty.devices == [
                BucketChange(handle: harness.device, bucket: BucketSnapshot(level: 8 * unit + 50, at: t0 + 5))
            ]
        )
        #expect(dirty.apps == [BucketChange(handle: app, bucket: BucketSnapshot(level: unit + 15, at: t0 + 5))])
        #expect(!dirty.apps.contains { $0.handle == idle })
        #expect(harness.scheduler.drainDirtyBuckets().isEmpty)
    }

    @Test func dirtyListStaysBoundedByTheSlots() throws {
        let harness = try Harness(SchedulerConfiguration(global: fastPolicy(appBurst: 1000, deviceBurst: 1000)))
        let app = harness.app()
        for step in 0..<500 { _ = harness.silent(app, now: t0 + Int64(step)) }
        #expect(harness.scheduler.dirtyApps.count == 1)
        #expect(harness.scheduler.dirtyDevices.count == 1)
        // A removed device's slot stays listed once; its successor is reported in its place.
        _ = harness.scheduler.removeDevice(harness.device)
        let device = harness.scheduler.addDevice(now: t0)
        #expect(harness.scheduler.dirtyDevices.count == 1)
        let dirty = harness.scheduler.drainDirtyBuckets()
        #expect(dirty.devices.map(\.handle) == [device])
        #expect(dirty.apps.isEmpty)
    }

    @Test func restoredBucketsContinueWhereTheyWere() throws {
        let first = try Harness()
        let app = first.app()
        _ = first.exhaust(app, now: t0)
        let saved = first.scheduler.drainDirtyBuckets()

        // Restart 10 minutes later: the app bucket has refilled half a token, not a full burst.
        let second = try Harness(now: t0 + 10 * minute)
        let restoredApp = second.app()
        #expect(second.scheduler.restoreBucket(device: second.device, saved.devices[0].bucket))
        #expect(second.scheduler.restoreBucket(app: restoredApp, saved.apps[0].bucket))
        let now = t0 + 10 * minute
        #expect(second.scheduler.bucket(app: restoredApp, now: now) == first.scheduler.bucket(app: app, now: now))
        #expect(
            second.scheduler.bucket(device: second.device, now: now)
                == first.scheduler.bucket(device: first.device, now: now)
        )
        #expect(second.silent(restoredApp, now: now).acceptance.disposition == .held)
        #expect(second.scheduler.nextDeadline == t0 + 20 * minute)
    }

    @Test func aSnapshotFromTheFutureRefillsNothingUntilThen() throws {
        let harness = try Harness()
        let app = harness.app()
        #expect(harness.scheduler.restoreBucket(app: app, BucketSnapshot(level: 0, at: t0 + hour)))
        #expect(harness.scheduler.bucket(app: app, now: t0 + 30 * minute)?.level == 0)
        #expect(harness.silent(app, now: t0 + 30 * minute).acceptance.disposition == .held)
        #expect(harness.scheduler.bucket(app: app, now: t0 + hour + 20 * minute)?.wholeTokens == 1)
        // Taking a token before the snapshot's time must not move the bucket's time back.
        let other = harness.app("com.example.other")
        _ = harness.scheduler.restoreBucket(
            app: other,
            BucketSnapshot(level: BucketSnapshot.unitsPerToken, at: t0 + hour)
        )
        #expect(harness.silent(other, now: t0).acceptance.disposition == .delivered)
        #expect(harness.scheduler.bucket(app: other, now: t0 + hour) == BucketSnapshot(level: 0, at: t0 + hour))
    }

    @Test func restoredLevelIsClampedToTheBurst() throws {
        let harness = try Harness()
        let app = harness.app()
        _ = harness.scheduler.restoreBucket(app: app, BucketSnapshot(level: .max, at: t0))
        #expect(harness.scheduler.bucket(app: app, now: t0)?.wholeTokens == 3)
    }

    @Test func restoredHeldPushesAreReleasedInAcceptanceOrder() throws {
        let harness = try Harness(connected: false)
        let a = harness.app("com.example.a")
        let b = harness.app("com.example.b")
        let pushes = [
            SchedulerPush(id: 30, app: b, pushClass: .silent, priority: .normal, expiresAt: t0 + day),
            SchedulerPush(id: 10, app: a, pushClass: .silent, priority: .normal, expiresAt: t0 + day),
            SchedulerPush(id: 20, app: a, pushClass: .regular, priority: .low, expiresAt: t0 + day),
            SchedulerPush(id: 15, app: a, pushClass: .silent, priority: .normal, expiresAt: t0 + day),
        ]
        for push in pushes { #expect(harness.scheduler.restoreHeld(push, acceptedAt: t0)) }
        #expect(harness.scheduler.heldIDs(app: a) == [10, 15, 20])
        #expect(harness.scheduler.heldCount == 4)
        #expect(harness.scheduler.connect(harness.device, now: t0 + 1).releases.ids == [10, 15, 20, 30])
    }

    @Test func restoredPriority5KeepsItsDeadlineFromAcceptance() throws {
        let harness = try Harness()
        let app = harness.app()
        _ = harness.scheduler.setPower(harness.device, .idle, now: t0)
        let push = SchedulerPush(id: 7, app: app, pushClass: .regular, priority: .normal, expiresAt: t0 + day)
        #expect(harness.scheduler.restoreHeld(push, acceptedAt: t0 - 10 * minute))
        #expect(harness.scheduler.nextDeadline == t0 + 5 * minute)
        #expect(harness.scheduler.advance(now: t0 + 5 * minute).releases.ids == [7])
    }

    @Test func restoredSilentPushesAreReleasedByBudget() throws {
        let harness = try Harness()
        let app = harness.app()
        let push = SchedulerPush(id: 7, app: app, pushClass: .silent, priority: .normal, expiresAt: t0 + day)
        #expect(harness.scheduler.restoreHeld(push, acceptedAt: t0 - hour))
        // Buckets are full: the restored push is due at once.
        #expect(harness.scheduler.nextDeadline! <= t0)
        let output = harness.scheduler.advance(now: t0)
        #expect(output.releases.kinds == [.budget])
    }

    @Test func restoredExpiredPushesAreDroppedByTheFirstAdvance() throws {
        let harness = try Harness(connected: false)
        let app = harness.app()
        let push = SchedulerPush(id: 7, app: app, pushClass: .silent, priority: .normal, expiresAt: t0 - 1)
        #expect(harness.scheduler.restoreHeld(push, acceptedAt: t0 - hour))
        #expect(harness.scheduler.advance(now: t0).drops.reasons == [.expired])
    }

    @Test func restoredHeldAboveTheLimitIsTrimmedByTheNextAcceptance() throws {
        let harness = try Harness(SchedulerConfiguration(global: SchedulerPolicy(maxHeldPerApp: 2)), connected: false)
        let app = harness.app()
        for id in UInt64(1)...4 {
            let push = SchedulerPush(id: id, app: app, pushClass: .silent, priority: .normal, expiresAt: t0 + day)
            harness.scheduler.restoreHeld(push, acceptedAt: t0)
        }
        #expect(harness.scheduler.heldCount(app: app) == 4)
        let next = SchedulerPush(id: 5, app: app, pushClass: .silent, priority: .normal, expiresAt: t0 + day)
        #expect(harness.scheduler.accept(next, now: t0)?.drops.ids == [1, 2, 3])
        #expect(harness.scheduler.heldIDs(app: app) == [4, 5])
    }

    @Test func withdrawnHeldPushIsGoneWithoutADrop() throws {
        let harness = try Harness(connected: false)
        let app = harness.app()
        for (id, pushClass) in [(UInt64(1), PushClass.silent), (2, .regular), (3, .silent)] {
            let push = SchedulerPush(id: id, app: app, pushClass: pushClass, priority: .normal, expiresAt: t0 + day)
            #expect(harness.scheduler.restoreHeld(push, acceptedAt: t0))
        }
        // From the silent list and from the regular list; a second withdrawal finds nothing.
        #expect(harness.scheduler.withdrawHeld(id: 3, app: app))
        #expect(harness.scheduler.withdrawHeld(id: 2, app: app))
        #expect(!harness.scheduler.withdrawHeld(id: 2, app: app))
        #expect(harness.scheduler.heldIDs(app: app) == [1])
        let online = harness.scheduler.connect(harness.device, now: t0 + 1)
        #expect(online.releases.ids == [1])
        #expect(online.drops.isEmpty)
    }
}
