import PropertyBased
import PushgateModel
import Testing

@testable import PushgateScheduler

/// Background fetch: windows, results, the adaptive refill, penalties, intervals, restarts.
@Suite struct FetchTests {
    private func refill(_ harness: Harness, _ app: AppHandle, at now: Int64) -> UInt64 {
        harness.scheduler.fetchFigures(app: app, now: now)!.effectiveRefillMilliPerHour
    }

    @Test("each result moves the refill by its weight: newData 1, noData 0.75, failed 0.25")
    func eachResultsEffect() throws {
        let harness = try Harness()
        let app = harness.app()
        #expect(refill(harness, app, at: t0) == 3000, "no result yet: the configured 3/h")
        for seq in UInt64(1)...3 { #expect(harness.scheduler.openFetchWindow(app: app, seq: seq, now: t0)) }
        harness.scheduler.reportFetchResult(device: harness.device, seq: 1, result: .newData, now: t0 + second)
        #expect(refill(harness, app, at: t0 + second) == 3000)
        harness.scheduler.reportFetchResult(device: harness.device, seq: 2, result: .noData, now: t0 + second)
        #expect(refill(harness, app, at: t0 + second) == 2625, "mean 0.875")
        harness.scheduler.reportFetchResult(device: harness.device, seq: 3, result: .failed, now: t0 + second)
        #expect(refill(harness, app, at: t0 + second) == 2000, "mean 2/3, exactly")
        let figures = harness.scheduler.fetchFigures(app: app, now: t0 + second)!
        #expect(figures.snapshot.history.results == [.failed, .noData, .newData])
        #expect(figures.snapshot.penaltyUntil == nil)
        #expect(harness.scheduler.drainDirtyFetchStates().map(\.app) == [app])
    }

    @Test("docs/scheduler.md's worked example: 2.81/h, then 1.25/h halved, then 1.02/h, then the floor")
    func workedExample() throws {
        let harness = try Harness()
        let app = harness.app()
        var seq: UInt64 = 0
        func report(_ result: FetchResult) {
            seq += 1
            harness.scheduler.openFetchWindow(app: app, seq: seq, now: t0)
            harness.scheduler.reportFetchResult(device: harness.device, seq: seq, result: result, now: t0)
        }
        for _ in 0..<6 { report(.newData) }
        for _ in 0..<2 { report(.noData) }
        #expect(refill(harness, app, at: t0) == 2812, "3 × 0.9375")
        seq += 1
        harness.scheduler.openFetchWindow(app: app, seq: seq, now: t0)
        _ = harness.scheduler.advance(now: t0 + 30 * second)
        #expect(harness.scheduler.fetchFigures(app: app, now: t0 + 30 * second)?.snapshot.history.score == 833)
        #expect(refill(harness, app, at: t0 + 30 * second) == 1250)
        #expect(refill(harness, app, at: t0 + 30 * second + day) == 2500, "after the penalty")
        for _ in 0..<2 {
            seq += 1
            harness.scheduler.openFetchWindow(app: app, seq: seq, now: t0 + minute)
        }
        _ = harness.scheduler.advance(now: t0 + 2 * minute)
        #expect(refill(harness, app, at: t0 + 2 * minute) == 1022)
        seq += 1
        harness.scheduler.openFetchWindow(app: app, seq: seq, now: t0 + 2 * minute)
        _ = harness.scheduler.advance(now: t0 + 3 * minute)
        #expect(refill(harness, app, at: t0 + 3 * minute) == 1000, "0.94/h: the floor")
    }

    @Test("no report within the window is a timeout, counted from the window's end, with a penalty")
    func timeoutByWindowExpiry() throws {
        let harness = try Harness()
        let app = harness.app()
        harness.scheduler.openFetchWindow(app: app, seq: 5, now: t0)
        #expect(harness.scheduler.nextDeadline == t0 + 30 * second)
        #expect(harness.scheduler.advance(now: t0 + 30 * second - 1).fetchTimeouts.isEmpty)
        let output = harness.scheduler.advance(now: t0 + 31 * second)
        #expect(output.fetchTimeouts == [FetchTimeout(device: harness.device, app: app, seq: 5, at: t0 + 30 * second)])
        let figures = harness.scheduler.fetchFigures(app: app, now: t0 + 31 * second)!
        #expect(figures.snapshot.history.results == [.timeout])
        #expect(figures.snapshot.penaltyUntil == t0 + 30 * second + day)
        #expect(figures.effectiveRefillMilliPerHour == 1000, "score 0: the floor of 1/h")
        #expect(harness.scheduler.fetchWindow(device: harness.device, seq: 5) == .timedOut(at: t0 + 30 * second))
    }

    @Test("the penalty halves the refill until it ends; the bucket refills at each rate for its own span")
    func penaltyStartAndEnd() throws {
        var policy = SchedulerPolicy(appBurst: 2, appRefillPerHour: 4, deviceBurst: 100, deviceRefillPerHour: 100)
        policy.timeoutPenaltyMillis = 10 * minute
        let harness = try Harness(SchedulerConfiguration(global: policy))
        let app = harness.app()
        #expect(harness.silent(app, now: t0).acceptance.disposition == .delivered)
        #expect(harness.silent(app, now: t0).acceptance.disposition == .delivered)
        harness.scheduler.openFetchWindow(app: app, seq: 1, now: t0)
        harness.scheduler.openFetchWindow(app: app, seq: 2, now: t0)
        harness.scheduler.reportFetchResult(device: harness.device, seq: 1, result: .newData, now: t0)
        let windowEnd = t0 + 30 * second
        _ = harness.scheduler.advance(now: windowEnd)
        // Up to the window's end at 4/h (4 units/ms): 120,000 units. Score 0.5: 2/h, halved: 1/h
        // for 10 minutes (600,000 units), then 2/h for the rest of the token (2,880,000 units).
        #expect(refill(harness, app, at: windowEnd) == 1000)
        let penaltyEnd = windowEnd + 10 * minute
        #expect(harness.scheduler.nextToken(app: app, now: windowEnd) == penaltyEnd + 1_440_000)
        #expect(harness.scheduler.bucket(app: app, now: penaltyEnd)?.level == 720_000)
        _ = harness.scheduler.advance(now: penaltyEnd)
        #expect(refill(harness, app, at: penaltyEnd) == 2000)
        #expect(harness.scheduler.fetchFigures(app: app, now: penaltyEnd)?.snapshot.penaltyUntil == nil, "over")
        #expect(harness.scheduler.fetchFigures(app: app, now: penaltyEnd - 1)?.snapshot.penaltyUntil == penaltyEnd)
        #expect(harness.scheduler.nextToken(app: app, now: penaltyEnd) == penaltyEnd + 1_440_000)
    }

    @Test("the refill never goes below the floor nor above the configured refill, whatever the results")
    func floorAndCeiling() throws {
        var policy = SchedulerPolicy()
        policy.minRefillPerHour = 2
        let topics = ["com.example.slow": TopicPolicyOverride(appRefillPerHour: 1)]
        let harness = try Harness(SchedulerConfiguration(global: policy, topics: topics))
        let app = harness.app()
        let slow = harness.app("com.example.slow")
        for seq in UInt64(1)...20 {
            harness.scheduler.openFetchWindow(app: app, seq: seq, now: t0)
            harness.scheduler.reportFetchResult(device: harness.device, seq: seq, result: .newData, now: t0)
            #expect(refill(harness, app, at: t0) == 3000)
        }
        for seq in UInt64(21)...40 {
            harness.scheduler.openFetchWindow(app: app, seq: seq, now: t0)
            harness.scheduler.openFetchWindow(app: slow, seq: seq + 100, now: t0)
        }
        _ = harness.scheduler.advance(now: t0 + minute)
        #expect(harness.scheduler.fetchSnapshot(app: app)?.history.results == Array(repeating: .timeout, count: 16))
        #expect(refill(harness, app, at: t0 + minute) == 2000, "the floor")
        #expect(refill(harness, slow, at: t0 + minute) == 1000, "a topic below the floor keeps its own 1/h")
    }

    @Test("fetch interval never: silent pushes wait for a wake event even with budget")
    func intervalNever() throws {
        let harness = try Harness()
        let app = harness.app()
        harness.scheduler.setFetchInterval(app, .never)
        let held = harness.silent(app, now: t0)
        #expect(held.acceptance.disposition == .held)
        #expect(held.acceptance.emptyBudget == nil, "not a budget exhaustion")
        #expect(harness.scheduler.nextDeadline == t0 + 30 * day, "its expiry; no budget timer")
        #expect(harness.scheduler.advance(now: t0 + day).releases.isEmpty)
        #expect(harness.scheduler.keepalive(harness.device, now: t0 + day).releases.ids == [held.id])
    }

    @Test("fetch interval of N seconds: budget releases at most once per N seconds, immediate ones included")
    func intervalSeconds() throws {
        let harness = try Harness()
        let app = harness.app()
        harness.scheduler.setFetchInterval(app, .seconds(600))
        #expect(harness.silent(app, now: t0).acceptance.disposition == .delivered)
        let second = harness.silent(app, now: t0 + 1000)
        #expect(second.acceptance.disposition == .held)
        #expect(harness.scheduler.nextDeadline == t0 + 600_000)
        #expect(harness.scheduler.advance(now: t0 + 599_999).releases.isEmpty)
        let released = harness.scheduler.advance(now: t0 + 600_000).releases
        #expect(released.ids == [second.id])
        #expect(released.kinds == [.budget])
        #expect(harness.scheduler.fetchSnapshot(app: app)?.lastBudgetAt == t0 + 600_000)
    }

    @Test("fetch interval minimum: only the buckets decide")
    func intervalMinimum() throws {
        let harness = try Harness()
        let app = harness.app()
        harness.scheduler.setFetchInterval(app, .seconds(600))
        harness.scheduler.setFetchInterval(app, .minimum)
        for _ in 0..<3 { #expect(harness.silent(app, now: t0).acceptance.disposition == .delivered) }
        #expect(harness.silent(app, now: t0).acceptance.emptyBudget == .app)
    }

    @Test("a restart inside a window keeps its remaining time: a report counts, no timeout is invented")
    func restartInsideAWindow() throws {
        let before = try Harness()
        let app = before.app()
        before.scheduler.openFetchWindow(app: app, seq: 9, now: t0)
        let stored = before.scheduler.fetchSnapshot(app: app)!

        let after = try Harness(now: t0 + 10 * second)
        let restored = after.app()
        #expect(after.scheduler.restoreFetchState(app: restored, stored))
        #expect(after.scheduler.restoreFetchWindow(app: restored, seq: 9, openedAt: t0))
        #expect(after.scheduler.advance(now: t0 + 10 * second).fetchTimeouts.isEmpty)
        #expect(
            after.scheduler.fetchWindow(device: after.device, seq: 9) == .open(app: restored, until: t0 + 30 * second)
        )
        let state = after.scheduler.reportFetchResult(
            device: after.device,
            seq: 9,
            result: .newData,
            now: t0 + 20 * second
        )
        #expect(state == .open(app: restored, until: t0 + 30 * second))
        #expect(after.scheduler.advance(now: t0 + hour).fetchTimeouts.isEmpty)
        #expect(after.scheduler.fetchSnapshot(app: restored)?.history.results == [.newData])
    }

    @Test("a window that ended while the gateway was down times out from its end")
    func restartAfterAWindow() throws {
        let harness = try Harness(now: t0 + hour)
        let app = harness.app()
        harness.scheduler.restoreFetchWindow(app: app, seq: 3, openedAt: t0)
        let output = harness.scheduler.advance(now: t0 + hour)
        #expect(output.fetchTimeouts.map(\.at) == [t0 + 30 * second])
        #expect(harness.scheduler.fetchSnapshot(app: app)?.penaltyUntil == t0 + 30 * second + day)
    }

    @Test("fetch figures survive a restart: results, penalty, interval, last budget release")
    func snapshotRoundTrip() throws {
        let before = try Harness()
        let app = before.app()
        before.scheduler.setFetchInterval(app, .seconds(120))
        _ = before.silent(app, now: t0)
        before.scheduler.openFetchWindow(app: app, seq: 1, now: t0)
        _ = before.scheduler.advance(now: t0 + minute)
        let stored = before.scheduler.fetchSnapshot(app: app)!
        #expect(stored.interval == .seconds(120))
        #expect(stored.lastBudgetAt == t0)
        #expect(stored.penaltyUntil == t0 + 30 * second + day)

        let after = try Harness(now: t0 + minute)
        let restored = after.app()
        after.scheduler.restoreFetchState(app: restored, stored)
        #expect(after.scheduler.fetchSnapshot(app: restored) == stored)
        #expect(
            after.silent(restored, now: t0 + minute).acceptance.disposition == .held,
            "the interval counts from before the restart"
        )
        #expect(refill(after, restored, at: t0 + minute) == 1000)
    }

    @Test("results for an unknown seq, a seq with no window (not silent) or an already counted one change nothing")
    func refusals() throws {
        let harness = try Harness()
        let app = harness.app()
        harness.scheduler.openFetchWindow(app: app, seq: 1, now: t0)
        harness.scheduler.openFetchWindow(app: app, seq: 2, now: t0)
        #expect(
            harness.scheduler.reportFetchResult(device: harness.device, seq: 99, result: .newData, now: t0) == .none
        )
        #expect(
            harness.scheduler.reportFetchResult(device: harness.device, seq: 1, result: .noData, now: t0)
                == .open(app: app, until: t0 + 30 * second)
        )
        #expect(
            harness.scheduler.reportFetchResult(device: harness.device, seq: 1, result: .newData, now: t0)
                == .reported(.noData)
        )
        _ = harness.scheduler.advance(now: t0 + minute)
        #expect(
            harness.scheduler.reportFetchResult(device: harness.device, seq: 2, result: .newData, now: t0 + minute)
                == .timedOut(at: t0 + 30 * second)
        )
        #expect(harness.scheduler.fetchSnapshot(app: app)?.history.results == [.timeout, .noData])
        #expect(!harness.scheduler.openFetchWindow(app: app, seq: 1, now: t0 + minute), "a seq opens one window")
    }

    @Test("a removed app's windows are forgotten; its timeout counts for nobody")
    func removedApp() throws {
        let harness = try Harness()
        let app = harness.app()
        harness.scheduler.openFetchWindow(app: app, seq: 1, now: t0)
        _ = harness.scheduler.removeApp(app)
        #expect(harness.scheduler.fetchWindow(device: harness.device, seq: 1) == .none)
        #expect(harness.scheduler.advance(now: t0 + minute).fetchTimeouts.isEmpty)
    }

    @Test("closed windows kept per device are capped; open ones too")
    func windowCaps() throws {
        let harness = try Harness()
        let app = harness.app()
        for seq in UInt64(1)...20 {
            harness.scheduler.openFetchWindow(app: app, seq: seq, now: t0)
            harness.scheduler.reportFetchResult(device: harness.device, seq: seq, result: .newData, now: t0)
        }
        #expect(harness.scheduler.fetchWindow(device: harness.device, seq: 20) == .reported(.newData))
        #expect(harness.scheduler.fetchWindow(device: harness.device, seq: 13) == .reported(.newData))
        #expect(harness.scheduler.fetchWindow(device: harness.device, seq: 12) == .none)
        for seq in UInt64(100)..<UInt64(100 + Scheduler.openWindowsPerDevice) {
            #expect(harness.scheduler.openFetchWindow(app: app, seq: seq, now: t0))
        }
        #expect(!harness.scheduler.openFetchWindow(app: app, seq: 1000, now: t0))
    }

    @Test("the score is monotone: a better result in place of any one never lowers it")
    func monotone() async {
        let order: [FetchResult] = [.timeout, .failed, .noData, .newData]
        // Results as ranks in `order`, a position to improve, and by how much.
        await propertyCheck(
            count: 200,
            input: Gen.int(in: 0...3).array(of: 1...20),
            Gen.int(in: 0...19),
            Gen.int(in: 1...3)
        ) { ranks, pick, step in
            var ranks = ranks
            let position = pick % ranks.count
            // Something to improve: a newData picked is made worse first.
            ranks[position] = min(ranks[position], 3 - step)
            var better = ranks
            better[position] += step
            var worse = FetchHistory()
            var improved = FetchHistory()
            for rank in ranks { worse.record(order[rank]) }
            for rank in better { improved.record(order[rank]) }
            #expect(improved.score >= worse.score)
            // Strictly higher unless the changed result is older than the last 16.
            let forgotten = position < ranks.count - FetchHistory.capacity
            #expect(forgotten || improved.scaled(3_600_000) > worse.scaled(3_600_000))
        }
    }
}
