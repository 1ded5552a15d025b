import PropertyBased
import PushgateModel
import Testing

@testable import PushgateScheduler

/// Random event sequences (accepts of every kind, connects, disconnects, keep-alives, power and
/// app states, apps and devices coming and going, time jumps, `advance` at and between deadlines),
/// each checked for one property over the whole trace. Each check returns its first failure only:
/// one issue per run keeps shrinking (which reruns the body many times) fast and small.
@Suite struct SchedulerPropertyTests {
    static let events = Gen.uint64().array(of: 1...150)
    static let runs = 200

    @Test func noPushIsReleasedTwice() async {
        await propertyCheck(count: Self.runs, input: Self.events) { words in
            let failure = Self.firstDoubleRelease(in: SchedulerSimulation.run(words))
            #expect(failure == nil, "\(failure ?? "")")
        }
    }

    /// At every step each accepted push is in exactly one place (released, dropped with a reason,
    /// discarded, stored, or held), and what the model says is held is what the scheduler holds.
    @Test func everyPushIsAccountedForAtEveryStep() async {
        await propertyCheck(count: Self.runs, input: Self.events) { words in
            let failure = Self.firstLostPush(in: SchedulerSimulation.run(words))
            #expect(failure == nil, "\(failure ?? "")")
        }
    }

    /// Releases that spend budget (silent, `immediate` or `budget`) never exceed, in any window,
    /// the burst plus the refill over the window: per app and per device.
    @Test func budgetedReleasesStayWithinTheBuckets() async {
        await propertyCheck(count: Self.runs, input: Self.events) { words in
            let failure = Self.firstBudgetExcess(in: SchedulerSimulation.run(words))
            #expect(failure == nil, "\(failure ?? "")")
        }
    }

    /// Each release batch is in acceptance order, and so is each app's stream of silent releases.
    @Test func releasesFollowAcceptanceOrder() async {
        await propertyCheck(count: Self.runs, input: Self.events) { words in
            let failure = Self.firstOrderBreak(in: SchedulerSimulation.run(words))
            #expect(failure == nil, "\(failure ?? "")")
        }
    }

    /// The rules the simulation checks as it goes: dispositions, who may be released when, wake
    /// events emptying the device, nothing due left after `advance`, the held limit.
    @Test func everyStepFollowsTheRules() async {
        await propertyCheck(count: Self.runs, input: Self.events) { words in
            let failure = SchedulerSimulation.run(words).violations.first
            #expect(failure == nil, "\(failure ?? "")")
        }
    }

    @Test func theSimulationReachesEveryOutcome() {
        // The properties above mean little if the random runs never get there.
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        var words: [UInt64] = []
        for _ in 0..<20_000 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            words.append(state ^ (state >> 29))
        }
        let simulation = SchedulerSimulation.run(words)
        let dispositions = Set(simulation.steps.compactMap { $0.disposition?.rawValue })
        let kinds = Set(simulation.steps.flatMap { $0.releases.map(\.kind.rawValue) })
        let reasons = Set(simulation.steps.flatMap { $0.drops.map(\.reason) })
        #expect(dispositions == ["delivered", "held", "coalesced", "stored", "discarded"])
        #expect(kinds == ["immediate", "piggyback", "keepalive", "online", "budget"])
        #expect(reasons == Set(DropReason.allCases))
        for check in [Self.firstDoubleRelease, Self.firstLostPush, Self.firstBudgetExcess, Self.firstOrderBreak] {
            let failure = check(simulation)
            #expect(failure == nil, "\(failure ?? "")")
        }
        #expect(simulation.violations.isEmpty, "\(simulation.violations.first ?? "")")
    }

    // MARK: Properties

    static func firstDoubleRelease(in simulation: SchedulerSimulation) -> String? {
        var released: Set<UInt64> = []
        for (index, step) in simulation.steps.enumerated() {
            for release in step.releases where !released.insert(release.id).inserted {
                return "step \(index) (\(step.event)) released \(release.id) again"
            }
        }
        return nil
    }

    static func firstLostPush(in simulation: SchedulerSimulation) -> String? {
        var fates: [UInt64: Fate] = [:]
        for (index, step) in simulation.steps.enumerated() {
            let here = "step \(index) (\(step.event))"
            if let push = step.accepted, let disposition = step.disposition {
                guard fates[push.id] == nil else { return "\(here): id \(push.id) accepted twice" }
                switch disposition {
                case .delivered, .held, .coalesced: fates[push.id] = .held
                case .stored: fates[push.id] = .stored
                case .discarded: fates[push.id] = .discarded
                }
                if disposition == .coalesced, let replaced = step.replaced,
                    !step.drops.contains(where: { $0.id == replaced && $0.reason == .coalesced })
                {
                    return "\(here): replaced \(replaced) without a coalesced drop"
                }
            }
            for release in step.releases {
                guard fates[release.id] == .held else {
                    return "\(here): released \(release.id) from \(String(describing: fates[release.id]))"
                }
                fates[release.id] = .released
            }
            for drop in step.drops {
                guard fates[drop.id] == .held else {
                    return "\(here): dropped \(drop.id) from \(String(describing: fates[drop.id]))"
                }
                fates[drop.id] = .dropped(drop.reason)
            }
            if let push = step.accepted {
                switch step.disposition {
                case .delivered where fates[push.id] != .released: return "\(here): delivered but not released"
                case .held where fates[push.id] != .held, .coalesced where fates[push.id] != .held:
                    return "\(here): the held push is already gone"
                default: break
                }
            }
            let held = Set(fates.filter { $0.value == .held }.keys)
            if held != step.heldAfter {
                return "\(here): the model holds \(held.sorted()), the scheduler \(step.heldAfter.sorted())"
            }
        }
        guard fates.count == simulation.pushes.count else {
            return "\(simulation.pushes.count - fates.count) pushes never decided"
        }
        return nil
    }

    static func firstBudgetExcess(in simulation: SchedulerSimulation) -> String? {
        var perApp: [AppHandle: [Int64]] = [:]
        var perDevice: [DeviceHandle: [Int64]] = [:]
        for step in simulation.steps {
            for release in step.releases where release.kind == .immediate || release.kind == .budget {
                guard simulation.pushes[release.id]?.push.pushClass == .silent else { continue }
                perApp[release.app, default: []].append(step.now)
                perDevice[release.device, default: []].append(step.now)
            }
        }
        for (app, times) in perApp {
            let policy = simulation.pushes.values.first { $0.push.app == app }!.policy
            if let failure = firstExcess(times, burst: policy.appBurst, perHour: policy.appRefillPerHour) {
                return "\(app): \(failure)"
            }
        }
        let global = SchedulerSimulation.configuration.global
        for (device, times) in perDevice {
            if let failure = firstExcess(times, burst: global.deviceBurst, perHour: global.deviceRefillPerHour) {
                return "\(device): \(failure)"
            }
        }
        return nil
    }

    static func firstOrderBreak(in simulation: SchedulerSimulation) -> String? {
        var lastSilent: [SilentOrder: UInt64] = [:]
        for (index, step) in simulation.steps.enumerated() {
            let ids = step.releases.map(\.id)
            if ids != ids.sorted() { return "step \(index) (\(step.event)) released \(ids)" }
            // An app's silent pushes that wait for budget go in acceptance order; one at priority
            // 1 waits for a wake event instead, and the others pass it. A Web Push message below
            // the power state's urgency waits for the state, and higher ones pass it: the order
            // holds among the messages of one urgency.
            for release in step.releases {
                guard let push = simulation.pushes[release.id]?.push, push.waitsForBudget else { continue }
                let key = SilentOrder(app: release.app, urgency: push.urgency)
                if let last = lastSilent[key], last > release.id {
                    return "step \(index): \(release.app) released silent \(release.id) after \(last)"
                }
                lastSilent[key] = release.id
            }
        }
        return nil
    }

    private struct SilentOrder: Hashable {
        var app: AppHandle
        var urgency: WebPushUrgency?
    }

    /// Releases at `times` (in order) against a bucket of `burst` refilled `perHour`: in every
    /// window, at most the burst plus what the window refills.
    private static func firstExcess(_ times: [Int64], burst: Int, perHour: Int) -> String? {
        for first in times.indices {
            for last in first..<times.count {
                let allowed = Int64(burst) + Int64(perHour) * (times[last] - times[first]) / 3_600_000
                let released = Int64(last - first + 1)
                if released > allowed {
                    return "\(released) budgeted releases in [\(times[first]), \(times[last])], allowed \(allowed)"
                }
            }
        }
        return nil
    }
}

enum Fate: Equatable {
    case held
    case released
    case dropped(DropReason)
    case discarded
    case stored
}
