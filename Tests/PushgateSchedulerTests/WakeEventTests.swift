import PushgateModel
import Testing

@testable import PushgateScheduler

/// Wake events: everything held for the device goes, in acceptance order, without budget.
@Suite struct WakeEventTests {
    @Test func priority10PiggybacksEverythingHeldAcrossAppsInAcceptanceOrder() throws {
        let harness = try Harness()
        let a = harness.app("com.example.a")
        let b = harness.app("com.example.b")
        let c = harness.app("com.example.c")
        _ = harness.scheduler.setPower(harness.device, .idle, now: t0)
        let silentA = harness.exhaust(a, now: t0).held
        let lowB = harness.regular(b, .low, now: t0 + 1).id
        let normalA = harness.regular(a, .normal, now: t0 + 2).id
        let silentB = harness.exhaust(b, now: t0 + 3).held
        let silentA2 = harness.silent(a, now: t0 + 4).id
        let carrier = harness.regular(c, .high, now: t0 + 5)
        #expect(carrier.acceptance.disposition == .delivered)
        #expect(carrier.acceptance.releases.ids == [silentA, lowB, normalA, silentB, silentA2, carrier.id])
        #expect(carrier.acceptance.releases.kinds == Array(repeating: .piggyback, count: 5) + [.immediate])
        #expect(carrier.acceptance.releases.map(\.app) == [a, b, a, b, a, c])
        #expect(harness.scheduler.heldCount(device: harness.device) == 0)
        #expect(harness.scheduler.nextDeadline == nil)
    }

    @Test func piggybackTakesNoBudget() throws {
        let harness = try Harness()
        let app = harness.app()
        _ = harness.exhaust(app, now: t0)
        let before = harness.scheduler.bucket(device: harness.device, now: t0)
        _ = harness.regular(app, .high, now: t0)
        #expect(harness.scheduler.bucket(device: harness.device, now: t0) == before)
        #expect(harness.scheduler.bucket(app: app, now: t0)?.level == 0)
    }

    @Test func priority10WithNothingHeldReleasesOnlyItself() throws {
        let harness = try Harness()
        let app = harness.app()
        let push = harness.regular(app, .high, now: t0)
        #expect(
            push.acceptance
                == Acceptance(
                    disposition: .delivered,
                    releases: [Release(id: push.id, device: harness.device, app: app, kind: .immediate)]
                )
        )
    }

    @Test func keepaliveReleasesHeldEvenWithoutAStream() throws {
        let harness = try Harness(connected: false)
        let app = harness.app()
        let held = harness.silent(app, now: t0).id
        let output = harness.scheduler.keepalive(harness.device, now: t0 + 1)
        #expect(output.releases == [Release(id: held, device: harness.device, app: app, kind: .keepalive)])
    }

    @Test func connectReleasesHeldAsOnline() throws {
        let harness = try Harness(connected: false)
        let a = harness.app("com.example.a")
        let b = harness.app("com.example.b")
        let first = harness.silent(b, now: t0).id
        let second = harness.silent(a, now: t0).id
        let output = harness.scheduler.connect(harness.device, now: t0 + minute)
        #expect(output.releases.ids == [first, second])
        #expect(output.releases.kinds == [.online, .online])
        #expect(harness.scheduler.isConnected(harness.device) == true)
    }

    @Test func becomingAwakeIsAWakeEvent() throws {
        let harness = try Harness()
        let app = harness.app()
        _ = harness.scheduler.setPower(harness.device, .lowPower, now: t0)
        let silent = harness.exhaust(app, now: t0).held
        let deferred = harness.regular(app, .normal, now: t0).id
        let output = harness.scheduler.setPower(harness.device, .awake, now: t0 + 1)
        #expect(output.releases.ids == [silent, deferred])
        #expect(output.releases.kinds == [.online, .online])
    }

    @Test func repeatingAwakeIsNotAWakeEvent() throws {
        let harness = try Harness()
        let app = harness.app()
        let low = harness.regular(app, .low, now: t0).id
        #expect(harness.scheduler.setPower(harness.device, .awake, now: t0 + 1).isEmpty)
        #expect(harness.scheduler.heldIDs(app: app) == [low])
    }

    @Test func becomingAwakeWhileDisconnectedReleasesNothing() throws {
        let harness = try Harness(connected: false)
        let app = harness.app()
        _ = harness.scheduler.setPower(harness.device, .idle, now: t0)
        let held = harness.silent(app, now: t0).id
        #expect(harness.scheduler.setPower(harness.device, .awake, now: t0 + 1).isEmpty)
        #expect(harness.scheduler.power(harness.device) == .awake)
        #expect(harness.scheduler.connect(harness.device, now: t0 + 2).releases.ids == [held])
    }

    @Test func powerDefaultsToAwake() throws {
        let harness = try Harness()
        #expect(harness.scheduler.power(harness.device) == .awake)
        let app = harness.app()
        #expect(harness.regular(app, .normal, now: t0).acceptance.disposition == .delivered)
    }
}
