import PushgateModel
import Testing

@testable import PushgateScheduler

/// Devices and apps coming and going; stale handles; the timer heap staying small.
@Suite struct LifecycleTests {
    @Test func removeAppDropsItsHeldPushesAsUnregistered() throws {
        let harness = try Harness()
        let app = harness.app()
        let other = harness.app("com.example.other")
        let silent = harness.exhaust(app, now: t0).held
        let regular = harness.regular(app, .low, now: t0).id
        let kept = harness.regular(other, .low, now: t0).id
        let drops = harness.scheduler.removeApp(app)
        #expect(drops.ids.sorted() == [silent, regular])
        #expect(drops.reasons == [.unregistered, .unregistered])
        #expect(drops.allSatisfy { $0.app == app && $0.device == harness.device })
        #expect(harness.scheduler.heldCount(device: harness.device) == 1)
        #expect(harness.scheduler.apps(of: harness.device) == [other])
        #expect(harness.scheduler.keepalive(harness.device, now: t0).releases.ids == [kept])
        #expect(harness.scheduler.nextDeadline == nil)
    }

    @Test func removeDeviceDropsEverythingOfAllItsApps() throws {
        let harness = try Harness(connected: false)
        let a = harness.app("com.example.a")
        let b = harness.app("com.example.b")
        let ids = [harness.silent(a, now: t0).id, harness.silent(b, now: t0).id]
        let drops = harness.scheduler.removeDevice(harness.device)
        #expect(drops.ids.sorted() == ids)
        #expect(drops.reasons == [.unregistered, .unregistered])
        #expect(harness.scheduler.deviceCount == 0)
        #expect(harness.scheduler.appCount == 0)
        #expect(harness.scheduler.heldCount == 0)
    }

    /// The old handles point at slots a new device and app now use: every call with them must
    /// leave the new ones alone (the generation check, not just the live flag).
    @Test func staleHandlesAreIgnored() throws {
        let harness = try Harness()
        let app = harness.app()
        _ = harness.scheduler.removeDevice(harness.device)
        let scheduler = harness.scheduler
        let newDevice = scheduler.addDevice(now: t0)
        _ = scheduler.connect(newDevice, now: t0)
        let newApp = try #require(scheduler.addApp(device: newDevice, topic: "com.example.app"))
        // Without slot reuse the checks below would pass whatever the generation check did.
        try #require(newDevice.slot == harness.device.slot && newApp.slot == app.slot)
        let held = harness.exhaust(newApp, now: t0).held
        let appBucket = scheduler.bucket(app: newApp, now: t0)
        let deviceBucket = scheduler.bucket(device: newDevice, now: t0)

        let push = SchedulerPush(id: 1_000, app: app, pushClass: .silent, priority: .normal, expiresAt: t0 + hour)
        #expect(scheduler.accept(push, now: t0) == nil)
        #expect(scheduler.keepalive(harness.device, now: t0).isEmpty)
        #expect(scheduler.setPower(harness.device, .lowPower, now: t0).isEmpty)
        scheduler.disconnect(harness.device)
        #expect(scheduler.connect(harness.device, now: t0).isEmpty)
        #expect(scheduler.setAppState(app, .terminated).isEmpty)
        #expect(scheduler.restoreHeld(push, acceptedAt: t0) == false)
        #expect(scheduler.restoreBucket(device: harness.device, BucketSnapshot(level: 0, at: t0)) == false)
        #expect(scheduler.restoreBucket(app: app, BucketSnapshot(level: 0, at: t0)) == false)
        #expect(scheduler.addApp(device: harness.device, topic: "t") == nil)
        #expect(scheduler.removeApp(app).isEmpty)
        #expect(scheduler.removeDevice(harness.device).isEmpty)
        #expect(scheduler.heldCount(device: harness.device) == nil)
        #expect(scheduler.heldIDs(app: app) == nil)
        #expect(scheduler.bucket(app: app, now: t0) == nil)
        #expect(scheduler.device(of: app) == nil)

        // The new device and app, untouched: still connected, awake, their push still held,
        // their buckets as they were, the app not terminated.
        #expect(scheduler.isConnected(newDevice) == true)
        #expect(scheduler.power(newDevice) == .awake)
        #expect(scheduler.heldIDs(app: newApp) == [held])
        #expect(scheduler.appState(newApp) == .foreground)
        #expect(scheduler.bucket(app: newApp, now: t0) == appBucket)
        #expect(scheduler.bucket(device: newDevice, now: t0) == deviceBucket)
        #expect(scheduler.apps(of: newDevice) == [newApp])
    }

    @Test func reusedSlotsGetANewGeneration() throws {
        let harness = try Harness()
        let oldApp = harness.app()
        _ = harness.scheduler.removeDevice(harness.device)
        let device = harness.scheduler.addDevice(now: t0)
        let app = harness.scheduler.addApp(device: device, topic: "com.example.app")!
        #expect(device.slot == harness.device.slot)
        #expect(device != harness.device)
        #expect(app.slot == oldApp.slot)
        #expect(app != oldApp)
        #expect(harness.scheduler.isConnected(harness.device) == nil)
        #expect(harness.scheduler.isConnected(device) == false)
        #expect(harness.scheduler.device(of: app) == device)
    }

    @Test func newDeviceAndAppStartWithFullBuckets() throws {
        let harness = try Harness()
        let app = harness.app()
        #expect(harness.scheduler.bucket(device: harness.device, now: t0)?.wholeTokens == 10)
        #expect(harness.scheduler.bucket(app: app, now: t0)?.wholeTokens == 3)
    }

    @Test func removingAnAppInTheMiddleOfTheDeviceListKeepsTheOthers() throws {
        let harness = try Harness()
        let apps = (0..<4).map { harness.app("com.example.\($0)") }
        _ = harness.scheduler.removeApp(apps[1])
        _ = harness.scheduler.removeApp(apps[3])
        #expect(harness.scheduler.apps(of: harness.device) == [apps[2], apps[0]])
    }

    @Test func staleTimersDoNotAccumulate() throws {
        let harness = try Harness(connected: false)
        let app = harness.app()
        // Each held push leaves a 30-day expiry timer behind when a keep-alive releases it.
        for round in 0..<50_000 {
            let now = t0 + Int64(round)
            _ = harness.silent(app, now: now)
            _ = harness.scheduler.keepalive(harness.device, now: now)
        }
        #expect(harness.scheduler.timers.count <= 2048)
        #expect(harness.scheduler.held.count == 1)
        #expect(harness.scheduler.nextDeadline == nil)
    }

    @Test func manyDevicesReleaseIndependently() throws {
        let scheduler = try Scheduler(configuration: SchedulerConfiguration(global: fastPolicy(appBurst: 1)))
        var held: [UInt64: DeviceHandle] = [:]
        var id: UInt64 = 0
        for _ in 0..<100 {
            let device = scheduler.addDevice(now: t0)
            _ = scheduler.connect(device, now: t0)
            let app = scheduler.addApp(device: device, topic: "t")!
            for _ in 0..<2 {
                id += 1
                let push = SchedulerPush(id: id, app: app, pushClass: .silent, priority: .normal, expiresAt: t0 + hour)
                if scheduler.accept(push, now: t0)?.disposition == .held { held[id] = device }
            }
        }
        #expect(held.count == 100)
        #expect(scheduler.nextDeadline == t0 + second)
        let output = scheduler.advance(now: t0 + second)
        #expect(Set(output.releases.ids) == Set(held.keys))
        #expect(output.releases.allSatisfy { held[$0.id] == $0.device })
        #expect(output.releases.ids == output.releases.ids.sorted())
    }
}
