import Logging
import PushgateModel
import PushgateScheduler
import PushgateStore
import PushgateTestKit
import Testing

@testable import PushgateDelivery

/// The shard's state alone: requests in, plans out, no event loop, no store, no stream. Every
/// plan is either confirmed (its commit succeeded) or restored (it failed); restoring must give
/// back memory exactly as the disk has it, which `Picture` compares.
@Suite("Shard plans: what each change writes, and the one restore after a failed commit")
struct ShardPlanTests {
    // MARK: Accepting

    @Test(
        "a push delivered at once queues one entry with its seq; restored, the queue and the seq reservation are as before"
    )
    func deliveredRestored() throws {
        let shard = try Shard()
        let before = shard.picture()
        let acceptance = try shard.accept(shard.push(.alert, .high))
        #expect(acceptance.disposition == .delivered)
        #expect(acceptance.plan.entries == [PlannedEntry(deviceID: shard.device.id, seq: 1)])
        #expect(acceptance.plan.commands.map(\.kind) == ["reserve", "enqueue"])
        shard.state.restore(acceptance.plan)
        #expect(shard.picture() == before)
    }

    @Test("a silent push held for its budget: restored, it is held nowhere, and the scheduler releases nothing for it")
    func heldRestored() throws {
        let shard = try Shard()
        try shard.spendAppBudget()
        let before = shard.picture()
        let acceptance = try shard.accept(shard.push(.background, .normal))
        #expect(acceptance.disposition == .held)
        #expect(acceptance.plan.restorations.count == 1)
        shard.state.restore(acceptance.plan)
        #expect(shard.picture() == before)
        let (wake, released) = shard.state.keepalive(shard.device)
        #expect(released.isEmpty && wake.entries.isEmpty)
    }

    @Test(
        "a held push replaced by a newer one with its collapse id: restored, the older one is held again and the newer one not"
    )
    func coalescedRestored() throws {
        let shard = try Shard()
        try shard.spendAppBudget()
        shard.confirm(try shard.accept(shard.push(.background, .normal, collapseID: "c")))
        let before = shard.picture()
        let acceptance = try shard.accept(shard.push(.background, .normal, collapseID: "c"))
        #expect(acceptance.disposition == .coalesced)
        shard.state.restore(acceptance.plan)
        #expect(shard.picture() == before)
    }

    @Test("held pushes over maxHeldPerApp: the oldest dropped; restored, it is held again")
    func overflowRestored() throws {
        let shard = try Shard { $0.scheduler.global.maxHeldPerApp = 2 }
        try shard.spendAppBudget()
        for _ in 0..<2 { shard.confirm(try shard.accept(shard.push(.background, .normal))) }
        let before = shard.picture()
        let acceptance = try shard.accept(shard.push(.background, .normal))
        #expect(acceptance.disposition == .held)
        #expect(acceptance.plan.commands.contains { $0.kind == "remove" })
        shard.state.restore(acceptance.plan)
        #expect(shard.picture() == before)
    }

    @Test("an alert that wakes the device takes held pushes along: restored, the alert is gone and they are held again")
    func piggybackRestored() throws {
        let shard = try Shard()
        try shard.spendAppBudget()
        for _ in 0..<2 { shard.confirm(try shard.accept(shard.push(.background, .normal))) }
        let before = shard.picture()
        let acceptance = try shard.accept(shard.push(.alert, .high))
        #expect(acceptance.plan.entries.map(\.released) == [true, true, false])
        shard.state.restore(acceptance.plan)
        #expect(shard.picture() == before)
    }

    @Test("a stored push replacing one with its collapse id: the older leaves the queue only once the newer commits")
    func storedReplacement() throws {
        let shard = try Shard(connected: false)
        shard.confirm(try shard.accept(shard.push(.alert, .high, collapseID: "c")))
        let before = shard.picture()
        let acceptance = try shard.accept(shard.push(.alert, .high, collapseID: "c"))
        #expect(acceptance.disposition == .coalesced)
        #expect(shard.device.queue.count == 2)
        shard.state.restore(acceptance.plan)
        #expect(shard.picture() == before)
        let again = try shard.accept(shard.push(.alert, .high, collapseID: "c"))
        shard.confirm(again)
        #expect(shard.device.queue.map(\.seq) == [3])
    }

    @Test("refusals change nothing: unknown token, another topic, a full device queue")
    func refusalsChangeNothing() throws {
        let shard = try Shard(connected: false) { $0.maxQueuedPerDevice = 1 }
        shard.confirm(try shard.accept(shard.push(.alert, .high)))
        let before = shard.picture()
        var other = shard.push(.alert, .high)
        other.deviceToken = String(repeating: "0", count: 64)
        var topic = shard.push(.alert, .high)
        topic.topic = "com.example.other"
        for push in [other, topic, shard.push(.alert, .high)] {
            guard case .refused = shard.state.accept(push, expiration: .defaultLifetime) else {
                Issue.record("accepted \(push.apnsID)")
                continue
            }
        }
        #expect(shard.picture() == before)
    }

    // MARK: Releasing

    @Test("a keep-alive releases what is held; restored, the releases are held again")
    func keepaliveRestored() throws {
        let shard = try Shard()
        try shard.spendAppBudget()
        for _ in 0..<2 { shard.confirm(try shard.accept(shard.push(.background, .normal))) }
        let before = shard.picture()
        let (plan, released) = shard.state.keepalive(shard.device)
        #expect(released.count == 2)
        #expect(plan.restorations.count == 2)
        shard.state.restore(plan)
        #expect(shard.picture() == before)
    }

    @Test("a budget release by the scheduler's tick: restored, held again")
    func budgetReleaseRestored() throws {
        let shard = try Shard()
        try shard.spendAppBudget()
        shard.confirm(try shard.accept(shard.push(.background, .normal)))
        let before = shard.picture()
        shard.clock.advance(by: 3_600_000)
        var plan = ShardPlan()
        shard.state.apply(shard.state.scheduler.advance(now: shard.clock.nowMillis()), into: &plan)
        #expect(plan.entries.map(\.released) == [true])
        shard.state.restore(plan)
        #expect(shard.picture() == before)
    }

    // MARK: Acknowledging

    @Test("an ack removes what it covers at once; restored, its deletions ride on the device's next ack")
    func ackRestored() throws {
        let shard = try Shard()
        for _ in 0..<3 { shard.confirm(try shard.accept(shard.push(.alert, .high))) }
        for entry in shard.device.queue { entry.sent = true }
        let plan = try #require(shard.state.acknowledge(shard.device, upTo: 2, onlySent: true))
        #expect(shard.device.queue.map(\.seq) == [3])
        shard.state.restore(plan)
        #expect(shard.device.queue.map(\.seq) == [3])
        #expect(shard.device.uncommittedAcks.count == 1)
        let next = try #require(shard.state.acknowledge(shard.device, upTo: 3, onlySent: true))
        #expect(next.commands.filter { $0.kind == "ack" }.count == 2)
        #expect(shard.device.uncommittedAcks.isEmpty)
    }

    @Test("an ack that deletes nothing new plans nothing")
    func ackOfNothing() throws {
        let shard = try Shard()
        #expect(shard.state.acknowledge(shard.device, upTo: 5, onlySent: true) == nil)
    }

    // MARK: Devices and registrations

    @Test("a device created or an app registered: restored, gone")
    func registryRestored() throws {
        let shard = try Shard()
        let before = shard.state.devices.count
        let id = try Identifiers.newDeviceID()
        let created = shard.state.createDevice(id: id, secretHash: [1])
        #expect(shard.state.devices.count == before + 1)
        shard.state.restore(created)
        #expect(shard.state.devices.count == before)
        let token = try Identifiers.newToken(forDevice: shard.device.id)
        let registered = shard.state.register("com.example.second", token: token, on: shard.device)
        #expect(shard.device.tokensByTopic["com.example.second"] == token)
        shard.state.restore(registered)
        #expect(shard.device.tokensByTopic["com.example.second"] == nil)
        #expect(shard.state.registrations[token] == nil)
    }

    @Test("confirmed, a plan's entries are committed and the devices to write to are named once")
    func confirmed() throws {
        let shard = try Shard()
        let acceptance = try shard.accept(shard.push(.alert, .high))
        #expect(shard.device.queue.map(\.committed) == [false])
        let touched = shard.state.confirm(acceptance)
        #expect(touched.map(\.id) == [shard.device.id])
        #expect(shard.device.queue.map(\.committed) == [true])
        #expect(shard.state.counters.dispositions[.delivered] == 1)
    }
}

/// A shard's state with one device and one app, without an event loop: plans confirmed by hand.
private final class Shard {
    static let topic = "com.example.app"
    let clock = TestClock(1_800_000_000_000)
    let state: ShardState
    let device: DeviceState
    let token: String
    private var apnsIDs = 0

    init(connected: Bool = true, _ configure: (inout DeliveryConfiguration) -> Void = { _ in }) throws {
        var configuration = DeliveryConfiguration()
        configure(&configuration)
        let ids = AcceptanceIDs()
        state = try ShardState(
            clock: clock,
            configuration: configuration,
            counters: DeliveryCounters(),
            metrics: .none,
            observer: nil,
            logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() },
            queuedBudget: QueuedNotificationBudget(limit: 1 << 30),
            nextAcceptanceID: { ids.next() }
        )
        let id = try Identifiers.newDeviceID()
        _ = state.confirm(state.createDevice(id: id, secretHash: [0]))
        device = try #require(state.devices[id])
        token = try Identifiers.newToken(forDevice: id)
        _ = state.confirm(state.register(Self.topic, token: token, on: device))
        if connected {
            state.setStream(StreamBinding(generation: 1, now: clock.nowMillis()), of: device)
            _ = state.scheduler.connect(device.handle, now: clock.nowMillis())
        }
    }

    func push(_ type: PushType, _ priority: PushPriority, collapseID: String? = nil) -> Push {
        apnsIDs += 1
        let payload = type == .background ? #"{"aps":{"content-available":1}}"# : #"{"aps":{"alert":"hi"}}"#
        return Push(
            deviceToken: token,
            apnsID: "00000000-0000-4000-8000-\(String(format: "%012d", apnsIDs))",
            topic: Self.topic,
            pushType: type,
            priority: priority,
            collapseID: collapseID,
            payload: Array(payload.utf8)
        )
    }

    func accept(_ push: Push) throws -> AcceptancePlan {
        guard case .planned(let acceptance) = state.accept(push, expiration: .defaultLifetime) else {
            throw TimedOut(what: "a plan for \(push.apnsID)")
        }
        return acceptance
    }

    func confirm(_ acceptance: AcceptancePlan) {
        var plan = acceptance.plan
        state.seal(&plan)
        _ = state.confirm(
            AcceptancePlan(
                plan: plan,
                disposition: acceptance.disposition,
                deviceID: acceptance.deviceID,
                acceptanceID: acceptance.acceptanceID,
                replacing: acceptance.replacing,
                emptyBudget: acceptance.emptyBudget
            )
        )
    }

    /// Silent pushes delivered until the app's budget is empty (3 by default), confirmed.
    func spendAppBudget() throws {
        for _ in 0..<state.scheduler.configuration.global.appBurst {
            let acceptance = try accept(push(.background, .normal))
            #expect(acceptance.disposition == .delivered)
            confirm(acceptance)
        }
    }

    /// What a restore must bring back, as the disk would have it. Not the device's next seq: a
    /// seq taken by a plan that failed was never seen by the device and is not given again (a
    /// gap in seqs is harmless, a seq given twice would not be).
    struct Picture: Equatable {
        var held: [UInt64]
        var schedulerHeld: [UInt64]
        var heldCount: Int
        var queue: [String]
        var reservedSeq: UInt64
        var budgetBytes: Int
        var withQueue: Bool
    }

    func picture() -> Picture {
        let app = state.registrations[token]?.app
        return Picture(
            held: state.held.keys.sorted(),
            schedulerHeld: app.flatMap { state.scheduler.heldPushes(app: $0)?.map(\.id).sorted() } ?? [],
            heldCount: device.heldCount,
            queue: device.queue.map { "\($0.seq):\($0.record.acceptanceID):\($0.committed)" },
            reservedSeq: device.reservedSeq,
            budgetBytes: state.queuedBudget.bytes,
            withQueue: state.withQueue[device.id] != nil
        )
    }
}

extension StoreCommand {
    /// The command's name, for comparing plans by shape.
    fileprivate var kind: String { String(summary.prefix { $0 != " " }) }
}
