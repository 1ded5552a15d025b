import PushgateModel
import Testing

@testable import PushgateScheduler

let second: Int64 = 1000
let minute: Int64 = 60 * second
let hour: Int64 = 60 * minute
let day: Int64 = 24 * hour
/// An arbitrary start instant, far from zero so that nothing works by accident at the epoch.
let t0: Int64 = 1_700_000_000_000

/// A scheduler with one device and helpers that number pushes in acceptance order.
final class Harness {
    let scheduler: Scheduler
    let device: DeviceHandle
    private var lastID: UInt64 = 0

    init(
        _ configuration: SchedulerConfiguration = SchedulerConfiguration(),
        connected: Bool = true,
        now: Int64 = t0
    ) throws {
        scheduler = try Scheduler(configuration: configuration)
        device = scheduler.addDevice(now: now)
        if connected { _ = scheduler.connect(device, now: now) }
    }

    /// Each app's topic, as a shard knows it.
    private(set) var topics: [AppHandle: String] = [:]

    func app(_ topic: String = "com.example.app", on device: DeviceHandle? = nil) -> AppHandle {
        let app = scheduler.addApp(device: device ?? self.device, topic: topic)!
        topics[app] = topic
        return app
    }

    /// A reload of the policy.
    func reconfigure(_ configuration: SchedulerConfiguration, now: Int64) throws -> SchedulerOutput {
        try scheduler.reconfigure(configuration, now: now) { [topics] in topics[$0] }
    }

    func nextID() -> UInt64 {
        lastID += 1
        return lastID
    }

    func push(
        _ app: AppHandle,
        _ pushClass: PushClass,
        priority: PushPriority? = nil,
        collapse: String? = nil,
        expiresAt: Int64? = nil,
        nowOrNever: Bool = false,
        now: Int64
    ) -> (id: UInt64, acceptance: Acceptance) {
        let push = SchedulerPush(
            id: nextID(),
            app: app,
            pushClass: pushClass,
            priority: priority ?? (pushClass == .silent ? .normal : .high),
            collapseID: collapse,
            expiresAt: expiresAt ?? now + 30 * day,
            nowOrNever: nowOrNever
        )
        return (push.id, scheduler.accept(push, now: now)!)
    }

    func silent(
        _ app: AppHandle,
        collapse: String? = nil,
        expiresAt: Int64? = nil,
        nowOrNever: Bool = false,
        now: Int64
    )
        -> (id: UInt64, acceptance: Acceptance)
    {
        push(app, .silent, collapse: collapse, expiresAt: expiresAt, nowOrNever: nowOrNever, now: now)
    }

    func regular(
        _ app: AppHandle,
        _ priority: PushPriority,
        collapse: String? = nil,
        expiresAt: Int64? = nil,
        nowOrNever: Bool = false,
        now: Int64
    ) -> (id: UInt64, acceptance: Acceptance) {
        push(
            app,
            .regular,
            priority: priority,
            collapse: collapse,
            expiresAt: expiresAt,
            nowOrNever: nowOrNever,
            now: now
        )
    }

    /// Sends silent pushes until one is held: the ids delivered at once, and the held one.
    func exhaust(_ app: AppHandle, now: Int64) -> (delivered: [UInt64], held: UInt64) {
        var delivered: [UInt64] = []
        while true {
            let (id, acceptance) = silent(app, now: now)
            guard acceptance.disposition == .delivered else { return (delivered, id) }
            delivered.append(id)
        }
    }
}

extension Array where Element == Release {
    var ids: [UInt64] { map(\.id) }
    var kinds: [DeliveryKind] { map(\.kind) }
}

extension Array where Element == Drop {
    var ids: [UInt64] { map(\.id) }
    var reasons: [DropReason] { map(\.reason) }
}

/// A policy small enough to reason about in tests: 1 token/s buckets.
func fastPolicy(
    appBurst: Int = 2,
    deviceBurst: Int = 4,
    maxHeldPerApp: Int = 8,
    maxDeferralMillis: Int64 = 15 * minute
) -> SchedulerPolicy {
    SchedulerPolicy(
        appBurst: appBurst,
        appRefillPerHour: 3600,
        deviceBurst: deviceBurst,
        deviceRefillPerHour: 3600,
        maxHeldPerApp: maxHeldPerApp,
        maxDeferralMillis: maxDeferralMillis
    )
}

extension Harness {
    /// A Web Push message: its class and priority follow its urgency.
    func webPush(
        _ app: AppHandle,
        _ urgency: WebPushUrgency,
        topic: String? = nil,
        expiresAt: Int64? = nil,
        nowOrNever: Bool = false,
        now: Int64
    ) -> (id: UInt64, acceptance: Acceptance) {
        let push = SchedulerPush(
            id: nextID(),
            app: app,
            pushClass: urgency.pushClass,
            priority: urgency.priority,
            collapseID: topic,
            expiresAt: expiresAt ?? now + 30 * day,
            nowOrNever: nowOrNever,
            urgency: urgency
        )
        return (push.id, scheduler.accept(push, now: now)!)
    }
}
