import PushgateModel
import Testing

@testable import PushgateScheduler

/// Held queues: collapse ids, overflow, expiry, terminated apps.
@Suite struct HeldQueueTests {
    @Test func sameCollapseIDReplacesTheHeldPushAndGoesLast() throws {
        let harness = try Harness(connected: false)
        let app = harness.app()
        let x1 = harness.silent(app, collapse: "x", now: t0).id
        let y = harness.silent(app, collapse: "y", now: t0).id
        let x2 = harness.silent(app, collapse: "x", now: t0 + 1)
        #expect(x2.acceptance.replaced == x1)
        #expect(x2.acceptance.drops == [Drop(id: x1, device: harness.device, app: app, reason: .coalesced)])
        #expect(harness.scheduler.heldIDs(app: app) == [y, x2.id])
        #expect(harness.scheduler.connect(harness.device, now: t0 + 2).releases.ids == [y, x2.id])
    }

    @Test func collapseIsPerAppAndPerClass() throws {
        let harness = try Harness()
        let a = harness.app("com.example.a")
        let b = harness.app("com.example.b")
        _ = harness.scheduler.setPower(harness.device, .idle, now: t0)
        let heldA = harness.exhaust(a, now: t0).held
        let heldB = harness.exhaust(b, now: t0).held
        let silentA = harness.silent(a, collapse: "x", now: t0)
        let silentB = harness.silent(b, collapse: "x", now: t0)
        let regularA = harness.regular(a, .low, collapse: "x", now: t0)
        #expect(silentA.acceptance.disposition == .held)
        #expect(silentB.acceptance.disposition == .held)
        #expect(regularA.acceptance.disposition == .held)
        #expect(harness.scheduler.heldIDs(app: a) == [heldA, silentA.id, regularA.id])
        #expect(harness.scheduler.heldIDs(app: b) == [heldB, silentB.id])
    }

    @Test func regularCollapseKeepsTheEarlierDeadline() throws {
        let harness = try Harness()
        let app = harness.app()
        _ = harness.scheduler.setPower(harness.device, .idle, now: t0)
        let first = harness.regular(app, .normal, collapse: "score", now: t0).id
        let second = harness.regular(app, .normal, collapse: "score", now: t0 + 10 * minute)
        #expect(second.acceptance.replaced == first)
        #expect(harness.scheduler.nextDeadline == t0 + 15 * minute)
        let output = harness.scheduler.advance(now: t0 + 15 * minute)
        #expect(output.releases.ids == [second.id])
    }

    @Test func overflowDropsTheOldest() throws {
        let harness = try Harness(connected: false)
        let app = harness.app()
        let ids = (0..<8).map { _ in harness.silent(app, now: t0).id }
        let ninth = harness.silent(app, now: t0 + 1)
        #expect(ninth.acceptance.disposition == .held)
        #expect(ninth.acceptance.drops == [Drop(id: ids[0], device: harness.device, app: app, reason: .overflow)])
        let tenth = harness.silent(app, now: t0 + 2)
        #expect(tenth.acceptance.drops.ids == [ids[1]])
        #expect(harness.scheduler.heldIDs(app: app) == Array(ids[2...]) + [ninth.id, tenth.id])
    }

    @Test func overflowCountsSilentPushesOnly() throws {
        let harness = try Harness(SchedulerConfiguration(global: SchedulerPolicy(maxHeldPerApp: 1)), connected: false)
        let app = harness.app()
        _ = harness.connectIdle()
        let regular = (0..<3).map { _ in harness.regular(app, .low, now: t0).id }
        let first = harness.exhaust(app, now: t0).held
        #expect(harness.silent(app, now: t0).acceptance.drops.ids == [first])
        #expect(Set(harness.scheduler.heldIDs(app: app)!).isSuperset(of: regular))
    }

    @Test func expiredHeldPushesAreDroppedByAdvanceAndNeverReleased() throws {
        let harness = try Harness(connected: false)
        let app = harness.app()
        let short = harness.silent(app, expiresAt: t0 + 1000, now: t0).id
        let long = harness.silent(app, now: t0).id
        #expect(harness.scheduler.nextDeadline == t0 + 1000)
        #expect(harness.scheduler.advance(now: t0 + 999).isEmpty)
        let output = harness.scheduler.advance(now: t0 + 1000)
        #expect(output.drops == [Drop(id: short, device: harness.device, app: app, reason: .expired)])
        #expect(output.releases.isEmpty)
        #expect(harness.scheduler.connect(harness.device, now: t0 + 2000).releases.ids == [long])
    }

    @Test func expiryIsEnforcedAtReleaseEvenBeforeItsTimerRuns() throws {
        let harness = try Harness(connected: false)
        let app = harness.app()
        let short = harness.silent(app, expiresAt: t0 + 1000, now: t0).id
        let long = harness.silent(app, now: t0).id
        let output = harness.scheduler.keepalive(harness.device, now: t0 + 1000)
        #expect(output.releases.ids == [long])
        #expect(output.drops.ids == [short])
        #expect(output.drops.reasons == [.expired])
    }

    @Test func expiredPushesAreSkippedByBudgetReleases() throws {
        let harness = try Harness(SchedulerConfiguration(global: fastPolicy(appBurst: 1)))
        let app = harness.app()
        let first = harness.exhaust(app, now: t0).held
        let short = harness.silent(app, expiresAt: t0 + 1500, now: t0).id
        let long = harness.silent(app, now: t0).id
        // One token a second: `first` goes at 1 s; `short` would be next at 2 s but has expired.
        #expect(harness.scheduler.advance(now: t0 + second).releases.ids == [first])
        let output = harness.scheduler.advance(now: t0 + 2 * second)
        #expect(output.drops == [Drop(id: short, device: harness.device, app: app, reason: .expired)])
        #expect(output.releases.ids == [long])
    }

    @Test func pushExpiringAtAcceptanceIsDiscarded() throws {
        let harness = try Harness()
        let app = harness.app()
        let push = harness.silent(app, expiresAt: t0, now: t0)
        #expect(push.acceptance.discardReason == .expired)
        #expect(harness.regular(app, .high, expiresAt: t0 - 1, now: t0).acceptance.discardReason == .expired)
    }

    @Test func terminatedDropsHeldSilentAndDiscardsUntilForeground() throws {
        let harness = try Harness(connected: false)
        let app = harness.app()
        _ = harness.connectIdle()
        let silent = harness.exhaust(app, now: t0).held
        let regular = harness.regular(app, .low, now: t0).id
        let drops = harness.scheduler.setAppState(app, .terminated)
        #expect(drops == [Drop(id: silent, device: harness.device, app: app, reason: .appTerminated)])
        #expect(harness.scheduler.heldIDs(app: app) == [regular])
        #expect(harness.scheduler.appState(app) == .terminated)

        #expect(harness.silent(app, now: t0 + hour).acceptance.discardReason == .appTerminated)
        #expect(harness.scheduler.setAppState(app, .background).isEmpty)
        #expect(harness.scheduler.appState(app) == .terminated)
        #expect(harness.silent(app, now: t0 + hour).acceptance.discardReason == .appTerminated)

        _ = harness.scheduler.setAppState(app, .foreground)
        #expect(harness.silent(app, now: t0 + hour).acceptance.disposition == .delivered)
    }

    // A silent push at priority 1 waits for a wake event in its app's regular list, yet it is
    // one of the app's silent pushes (a black-box review found all three rules skipping it).

    @Test func silentPushesAtPriority1CountTowardsMaxHeldPerApp() throws {
        let harness = try Harness(connected: false)
        let app = harness.app()
        let waiting = (0..<4).map { _ in harness.push(app, .silent, priority: .low, now: t0).id }
        let budgeted = (0..<4).map { _ in harness.silent(app, now: t0).id }
        let ninth = harness.silent(app, now: t0 + 1)
        #expect(ninth.acceptance.drops == [Drop(id: waiting[0], device: harness.device, app: app, reason: .overflow)])
        let tenth = harness.push(app, .silent, priority: .low, now: t0 + 2)
        #expect(tenth.acceptance.drops.ids == [waiting[1]])
        #expect(Set(harness.scheduler.heldIDs(app: app) ?? []) == Set(waiting[2...] + budgeted + [ninth.id, tenth.id]))
    }

    @Test(arguments: [(PushPriority.normal, PushPriority.low), (.low, .normal)])
    func collapseReplacesAcrossSilentPriorities(first: PushPriority, second: PushPriority) throws {
        let harness = try Harness(connected: false)
        let app = harness.app()
        let older = harness.push(app, .silent, priority: first, collapse: "c", now: t0).id
        let newer = harness.push(app, .silent, priority: second, collapse: "c", now: t0 + 1)
        #expect(newer.acceptance.replaced == older)
        #expect(newer.acceptance.drops == [Drop(id: older, device: harness.device, app: app, reason: .coalesced)])
        #expect(harness.scheduler.heldIDs(app: app) == [newer.id])
    }

    @Test func aSilentPushDeliveredAtOnceReplacesTheHeldOneWithItsCollapseID() throws {
        let harness = try Harness()
        let app = harness.app()
        let waiting = harness.push(app, .silent, priority: .low, collapse: "c", now: t0).id
        let newer = harness.silent(app, collapse: "c", now: t0 + 1)
        #expect(newer.acceptance.disposition == .delivered)
        #expect(newer.acceptance.releases.ids == [newer.id])
        #expect(newer.acceptance.drops == [Drop(id: waiting, device: harness.device, app: app, reason: .coalesced)])
        #expect(harness.scheduler.heldIDs(app: app) == [])
    }

    @Test func terminatedDropsHeldSilentPushesAtPriority1() throws {
        let harness = try Harness()
        let app = harness.app()
        _ = harness.scheduler.setPower(harness.device, .lowPower, now: t0)
        let budgeted = harness.silent(app, now: t0).id
        let waiting = harness.push(app, .silent, priority: .low, now: t0).id
        let regular = harness.regular(app, .low, now: t0).id
        let drops = harness.scheduler.setAppState(app, .terminated)
        #expect(Set(drops.ids) == [budgeted, waiting])
        #expect(drops.allSatisfy { $0.reason == .appTerminated })
        #expect(harness.scheduler.heldIDs(app: app) == [regular])
    }

    @Test func terminatedAppStillGetsRegularPushes() throws {
        let harness = try Harness()
        let app = harness.app()
        _ = harness.scheduler.setAppState(app, .terminated)
        #expect(harness.regular(app, .high, now: t0).acceptance.disposition == .delivered)
    }

    @Test func terminatedStopsTheAppsBudgetTimer() throws {
        let harness = try Harness()
        let app = harness.app()
        _ = harness.exhaust(app, now: t0)
        #expect(harness.scheduler.nextDeadline == t0 + 20 * minute)
        _ = harness.scheduler.setAppState(app, .terminated)
        #expect(harness.scheduler.nextDeadline == nil)
    }

    @Test func backgroundIsRecordedWhenNotTerminated() throws {
        let harness = try Harness()
        let app = harness.app()
        _ = harness.scheduler.setAppState(app, .background)
        #expect(harness.scheduler.appState(app) == .background)
        #expect(harness.silent(app, now: t0).acceptance.disposition == .delivered)
    }
}

extension Harness {
    /// Connects the device in power state `idle`, so priority-5 pushes are deferred.
    func connectIdle(now: Int64 = t0) -> SchedulerOutput {
        _ = scheduler.setPower(device, .idle, now: now)
        return scheduler.connect(device, now: now)
    }
}
