import PushgateModel

@testable import PushgateScheduler

/// Plays a random event sequence against a scheduler and records what came out of each step, plus
/// every rule it saw broken on the way. Each 64-bit word is one event; small words are simple
/// events, so shrinking towards zero gives short, readable counterexamples.
final class SchedulerSimulation {
    /// Short buckets so that refills happen within a run: apps 1 token/s (topic t1: 0.5/s),
    /// devices 1.5 tokens/s (a token every 666.67 ms, which exercises sub-millisecond carry).
    static let configuration = SchedulerConfiguration(
        global: SchedulerPolicy(
            appBurst: 2,
            appRefillPerHour: 3600,
            deviceBurst: 3,
            deviceRefillPerHour: 5400,
            maxHeldPerApp: 3,
            maxDeferralMillis: 5000
        ),
        topics: [
            "t1": TopicPolicyOverride(appBurst: 1, appRefillPerHour: 1800, maxHeldPerApp: 2, maxDeferralMillis: 2000)
        ]
    )
    /// Apps of `t2` are Web Push subscriptions: every push to one is a Web Push message, with an
    /// urgency in place of a priority.
    static let topics = ["t0", "t1", "t2"]
    static let webPushTopic = "t2"
    static let timeSteps: [Int64] = [0, 0, 1, 50, 333, 700, 1500, 9000]
    static let lifetimes: [Int64] = [500, 3000, 20_000, 30 * day]

    struct Pushed {
        var push: SchedulerPush
        var device: DeviceHandle
        var policy: SchedulerPolicy
    }

    struct Step {
        var event: String
        var now: Int64
        var accepted: SchedulerPush?
        var disposition: Disposition?
        /// With `coalesced`: the held push it replaced.
        var replaced: UInt64?
        var releases: [Release] = []
        var drops: [Drop] = []
        /// What the scheduler says is held after the step, over all live apps.
        var heldAfter: Set<UInt64> = []
    }

    struct Device {
        var handle: DeviceHandle
        var apps: [AppHandle]
        var connected = false
        var power = DevicePower.awake
    }

    let scheduler: Scheduler
    private(set) var now = t0
    private var lastID: UInt64 = 0
    private var devices: [Device?] = [nil, nil, nil]
    private var appStates: [AppHandle: AppState] = [:]
    private var webPushApps: Set<AppHandle> = []
    private(set) var pushes: [UInt64: Pushed] = [:]
    private(set) var steps: [Step] = []
    private(set) var violations: [String] = []

    init() {
        scheduler = try! Scheduler(configuration: Self.configuration)
        for index in devices.indices { addDevice(at: index, appCount: 2, firstTopic: index) }
    }

    static func run(_ words: [UInt64]) -> SchedulerSimulation {
        let simulation = SchedulerSimulation()
        for word in words { simulation.play(word) }
        return simulation
    }

    // MARK: Events

    func play(_ word: UInt64) {
        now += Self.timeSteps[Int(word >> 56 & 7)]
        let deviceIndex = Int(word >> 12 % 3)
        let op = word % 32
        switch op {
        case 0...11: accept(word, deviceIndex: deviceIndex)
        case 12, 13:
            withDevice(deviceIndex, "connect") { device, step in
                let output = scheduler.connect(device.handle, now: now)
                step.releases = output.releases
                step.drops = output.drops
                devices[deviceIndex]!.connected = true
                checkWake(devices[deviceIndex]!, step: step)
            }
        case 14, 15:
            withDevice(deviceIndex, "disconnect") { device, _ in
                scheduler.disconnect(device.handle)
                devices[deviceIndex]!.connected = false
            }
        case 16, 17:
            withDevice(deviceIndex, "keepalive") { device, step in
                let output = scheduler.keepalive(device.handle, now: now)
                step.releases = output.releases
                step.drops = output.drops
                checkWake(device, step: step)
            }
        case 18, 19:
            let power = DevicePower.allCases[Int(word >> 8 % 3)]
            withDevice(deviceIndex, "setPower \(power)") { device, step in
                let output = scheduler.setPower(device.handle, power, now: now)
                step.releases = output.releases
                step.drops = output.drops
                devices[deviceIndex]!.power = power
                if power == .awake, device.power != .awake, device.connected {
                    checkWake(devices[deviceIndex]!, step: step)
                }
            }
        case 20:
            let state = AppState.allCases[Int(word >> 8 % 3)]
            withApp(word, deviceIndex, "setAppState \(state)") { app, step in
                step.drops = scheduler.setAppState(app, state)
                if state != .background || appStates[app] != .terminated { appStates[app] = state }
            }
        case 21, 22:
            // A burst of silent pushes to one app, so that its bucket runs dry.
            for offset in 0..<(2 + word >> 8 % 3) {
                accept(word & ~(1 << 20) ^ offset << 24, deviceIndex: deviceIndex)
            }
        case 27:
            withApp(word, deviceIndex, "removeApp") { app, step in
                step.drops = scheduler.removeApp(app)
                devices[deviceIndex]!.apps.removeAll { $0 == app }
            }
        case 28:
            withDevice(deviceIndex, "addApp") { device, _ in
                guard device.apps.count < 3 else { return }
                let topic = Self.topics[Int(word >> 8 % 3)]
                let app = scheduler.addApp(device: device.handle, topic: topic)!
                devices[deviceIndex]!.apps.append(app)
                appStates[app] = .foreground
                if topic == Self.webPushTopic { webPushApps.insert(app) } else { webPushApps.remove(app) }
            }
        case 29:
            withDevice(deviceIndex, "removeDevice") { device, step in
                step.drops = scheduler.removeDevice(device.handle)
                devices[deviceIndex] = nil
            }
        case 30:
            if devices[deviceIndex] == nil {
                record(Step(event: "addDevice \(deviceIndex)", now: now))
                addDevice(at: deviceIndex, appCount: 1 + Int(word >> 8 % 3), firstTopic: Int(word >> 10 % 3))
            } else {
                advance(to: now)
            }
        case 31: advance(to: max(now, scheduler.nextDeadline ?? now))
        default: advance(to: now)
        }
    }

    private func accept(_ word: UInt64, deviceIndex: Int) {
        var silent = word >> 20 & 1 == 0
        var priority: PushPriority =
            silent ? (word >> 21 & 1 == 0 ? .normal : .low) : [.high, .normal, .low][Int(word >> 21 % 3)]
        let collapseID = [nil, nil, "a", "b"][Int(word >> 24 & 3)]
        let expiresAt = now + Self.lifetimes[Int(word >> 26 & 3)]
        let nowOrNever = word >> 28 & 15 == 0
        withApp(word, deviceIndex, "accept") { app, step in
            let device = devices[deviceIndex]!
            var urgency: WebPushUrgency?
            if webPushApps.contains(app) {
                let chosen = WebPushUrgency.allCases[Int(word >> 20 & 3)]
                (urgency, silent, priority) = (chosen, chosen.pushClass == .silent, chosen.priority)
            }
            lastID += 1
            let push = SchedulerPush(
                id: lastID,
                app: app,
                pushClass: silent ? .silent : .regular,
                priority: priority,
                collapseID: collapseID,
                expiresAt: expiresAt,
                nowOrNever: nowOrNever,
                urgency: urgency
            )
            pushes[push.id] = Pushed(push: push, device: device.handle, policy: scheduler.policy(of: app)!)
            let before = Before(
                heldSilent: heldSilent(of: app, allowedOn: device),
                tokens: scheduler.bucket(app: app, now: now)!.wholeTokens > 0
                    && scheduler.bucket(device: device.handle, now: now)!.wholeTokens > 0
            )
            guard let acceptance = scheduler.accept(push, now: now) else {
                violations.append("step \(steps.count): accept for a live app returned nil")
                return
            }
            let kind =
                urgency.map { "webpush \($0.rawValue)" } ?? "\(silent ? "silent" : "regular") p\(priority.rawValue)"
            step.event =
                "accept \(kind) collapse \(collapseID ?? "-")"
                + " expires +\(expiresAt - now)\(nowOrNever ? " nowOrNever" : "") → \(acceptance.disposition)"
            step.accepted = push
            step.disposition = acceptance.disposition
            step.replaced = acceptance.replaced
            step.releases = acceptance.releases
            step.drops = acceptance.drops
            checkDecision(push, acceptance, device: device, before: before)
            if acceptance.disposition == .delivered, priority == .high, !silent { checkWake(device, step: step) }
        }
    }

    private func advance(to time: Int64) {
        now = time
        var step = Step(event: "advance", now: now)
        let output = scheduler.advance(now: now)
        step.releases = output.releases
        step.drops = output.drops
        checkReleases(step)
        record(step)
        checkNothingDueIsLeft()
    }

    private func withDevice(_ index: Int, _ event: String, _ body: (Device, inout Step) -> Void) {
        guard let device = devices[index] else { return advance(to: now) }
        var step = Step(event: "\(event) device \(index)", now: now)
        body(device, &step)
        checkReleases(step)
        record(step)
    }

    private func withApp(_ word: UInt64, _ deviceIndex: Int, _ event: String, _ body: (AppHandle, inout Step) -> Void) {
        guard let device = devices[deviceIndex], !device.apps.isEmpty else { return advance(to: now) }
        let app = device.apps[Int(word >> 16 % UInt64(device.apps.count))]
        var step = Step(event: "\(event) device \(deviceIndex) \(app)", now: now)
        body(app, &step)
        checkReleases(step)
        record(step)
    }

    private func addDevice(at index: Int, appCount: Int, firstTopic: Int) {
        let handle = scheduler.addDevice(now: now)
        var device = Device(handle: handle, apps: [])
        for offset in 0..<appCount {
            let topic = Self.topics[(firstTopic + offset) % 3]
            let app = scheduler.addApp(device: handle, topic: topic)!
            device.apps.append(app)
            appStates[app] = .foreground
            if topic == Self.webPushTopic { webPushApps.insert(app) } else { webPushApps.remove(app) }
        }
        devices[index] = device
    }

    private func record(_ step: Step) {
        var step = step
        for device in devices.compactMap({ $0 }) {
            for app in device.apps {
                let ids = scheduler.heldIDs(app: app) ?? []
                step.heldAfter.formUnion(ids)
                let maxHeld = scheduler.policy(of: app)!.maxHeldPerApp
                if heldSilent(of: app) > maxHeld {
                    violations.append(
                        "step \(steps.count) (\(step.event)): \(app) holds more than \(maxHeld) silent pushes"
                    )
                }
            }
        }
        steps.append(step)
    }

    private func heldSilent(of app: AppHandle) -> Int {
        (scheduler.heldIDs(app: app) ?? []).filter { pushes[$0]?.push.waitsForBudget == true }.count
    }

    /// Held silent pushes of the app that wait for budget and that the device's power state
    /// allows: a Web Push message below the state's urgency waits for the state instead.
    private func heldSilent(of app: AppHandle, allowedOn device: Device) -> Int {
        (scheduler.heldIDs(app: app) ?? []).filter { id in
            guard let push = pushes[id]?.push, push.waitsForBudget else { return false }
            return Self.allows(push, device.power)
        }.count
    }

    /// Whether a device in `power` may be given `push` (RFC 8030 section 5.3): every APNs push,
    /// and a Web Push message at or above the urgency the state takes.
    static func allows(_ push: SchedulerPush, _ power: DevicePower) -> Bool {
        push.urgency.map { $0 >= power.minimumUrgency } ?? true
    }

    // MARK: Rules

    enum Outcome {
        case delivered, held, stored
        case discarded(DiscardReason)

        func matches(_ acceptance: Acceptance) -> Bool {
            switch (self, acceptance.disposition) {
            case (.delivered, .delivered), (.held, .held), (.held, .coalesced), (.stored, .stored): true
            case (.discarded(let expected), .discarded): expected == acceptance.discardReason
            default: false
            }
        }
    }

    /// The disposition the product contract gives `push`, from what the model knows and the
    /// buckets as the scheduler reported them just before.
    private func checkDecision(_ push: SchedulerPush, _ acceptance: Acceptance, device: Device, before: Before) {
        let waits: Outcome = push.nowOrNever ? .discarded(.undeliverableNow) : .held
        let expected: Outcome
        if let urgency = push.urgency {
            let allowed = device.connected && urgency >= device.power.minimumUrgency
            switch urgency.pushClass {
            case .silent where appStates[push.app] == .terminated: expected = .discarded(.appTerminated)
            case .silent where allowed && before.heldSilent == 0 && before.tokens: expected = .delivered
            case .regular where allowed: expected = .delivered
            default: expected = waits
            }
            if !expected.matches(acceptance) {
                violations.append(
                    "step \(steps.count): web push \(push.id) got \(acceptance.disposition), expected \(expected)"
                )
            }
            return
        }
        switch (push.pushClass, push.priority) {
        case (.silent, _) where appStates[push.app] == .terminated: expected = .discarded(.appTerminated)
        case (.silent, .low): expected = waits
        case (.silent, _)
        where device.connected && device.power != .lowPower && before.heldSilent == 0 && before.tokens:
            expected = .delivered
        case (.silent, _): expected = waits
        case (.regular, _) where !device.connected: expected = push.nowOrNever ? .discarded(.undeliverableNow) : .stored
        case (.regular, .high): expected = .delivered
        case (.regular, .normal) where device.power == .awake: expected = .delivered
        case (.regular, _): expected = waits
        }
        if !expected.matches(acceptance) {
            violations.append(
                "step \(steps.count): push \(push.id) got \(acceptance.disposition), expected \(expected)"
            )
        }
    }

    struct Before {
        var heldSilent: Int
        /// Both buckets held a whole token.
        var tokens: Bool
    }

    private func checkReleases(_ step: Step) {
        for release in step.releases {
            guard let pushed = pushes[release.id] else {
                violations.append("step \(steps.count): released unknown id \(release.id)")
                continue
            }
            let here = "step \(steps.count) (\(step.event)): push \(release.id) \(release.kind.rawValue)"
            if release.device != pushed.device || release.app != pushed.push.app {
                violations.append("\(here) released for the wrong device or app")
            }
            if pushed.push.expiresAt <= now { violations.append("\(here) released after its expiry") }
            // Never below the urgency the device's state allows: not at once, not on budget, not
            // riding along with a wake event (RFC 8030 section 5.3).
            if let device = devices.compactMap({ $0 }).first(where: { $0.handle == pushed.device }),
                !Self.allows(pushed.push, device.power)
            {
                violations.append("\(here) below the urgency the device's state (\(device.power)) allows")
            }
            if release.kind == .immediate, step.accepted?.id != release.id {
                violations.append("\(here) is immediate but was not the push accepted in this step")
            }
            guard pushed.push.pushClass == .silent, release.kind == .immediate || release.kind == .budget else {
                continue
            }
            if pushed.push.priority == .low, pushed.push.urgency == nil {
                violations.append("\(here): priority 1 released without a wake event")
            }
            let device = devices.compactMap { $0 }.first { $0.handle == pushed.device }
            if device?.connected != true { violations.append("\(here) while the device is not connected") }
            if device?.power == .lowPower { violations.append("\(here) in lowPower") }
            if appStates[pushed.push.app] == .terminated { violations.append("\(here) to a terminated app") }
        }
    }

    /// After a wake event the device holds nothing its power state allows.
    private func checkWake(_ device: Device, step: Step) {
        let held = device.apps.flatMap { scheduler.heldIDs(app: $0) ?? [] }
        let allowed = held.filter { id in pushes[id].map { Self.allows($0.push, device.power) } ?? true }
        if !allowed.isEmpty {
            violations.append(
                "step \(steps.count) (\(step.event)): \(allowed.count) pushes still held after a wake event"
            )
        }
    }

    /// After `advance(now)`, no connected device outside lowPower has an app with a held silent
    /// push while both buckets hold a whole token: the budget release would have been due.
    private func checkNothingDueIsLeft() {
        for device in devices.compactMap({ $0 }) where device.connected && device.power != .lowPower {
            guard scheduler.bucket(device: device.handle, now: now)!.wholeTokens > 0 else { continue }
            for app in device.apps
            where heldSilent(of: app, allowedOn: device) > 0 && scheduler.bucket(app: app, now: now)!.wholeTokens > 0 {
                violations.append(
                    "step \(steps.count - 1) (advance): \(app) has a held silent push and both buckets have tokens"
                )
            }
        }
    }
}
