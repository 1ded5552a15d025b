import PushgateModel

/// The power-aware scheduler of one shard: silent budgets, held queues, wake events.
///
/// A pure state machine: no I/O, no clock (every event carries `now`, milliseconds since the
/// epoch), no locks. One instance per shard, confined by its owner to one thread. Each event
/// returns what to deliver now (`Release`) and which held pushes were given up (`Drop`); the caller
/// keeps payloads by acceptance id and makes both durable.
///
/// Storage is dense: a device, an app and a held push are each a slot in an array of small
/// structs, reused through free lists. Work that falls due later (a bucket refilling enough to
/// release a held silent push, a priority-5 deferral running out, a held push expiring) is a timer
/// in one min-heap; after any call, `nextDeadline` says when to call `advance(now:)`.
///
/// Handles that are unknown (removed, or from another instance) are ignored: each method says what
/// it returns then. Nothing a network peer sends can make the scheduler trap.
///
/// Bounds: held silent pushes are capped per app (`maxHeldPerApp`, the oldest dropped as
/// `overflow`). Held regular pushes (priority 5 or 1) are not capped here: the caller bounds
/// everything waiting per device before it calls `accept` (the delivery core refuses a push with
/// 429 once a device has `maxQueuedPerDevice` queued and held).
public final class Scheduler {
    /// The validated configuration in force, for what the caller needs per topic
    /// (`defaultExpirationMillis`, `fetchWindowMillis`); `reconfigure` replaces it.
    public internal(set) var configuration = SchedulerConfiguration()
    /// Index 0 is the global policy, then one per topic override.
    var policies: [ResolvedPolicy] = []
    var policyIndexByTopic: [String: UInt16] = [:]
    var deviceCapacity: UInt32 = 0
    /// Thousandths of a token per hour, as app rates.
    var deviceRate: UInt64 = 0

    var devices: [DeviceSlot] = []
    var apps: [AppSlot] = []
    var held: [HeldSlot] = []
    var windows: [FetchWindowSlot] = []
    var freeDevices: [UInt32] = []
    var freeApps: [UInt32] = []
    var freeHeld: [UInt32] = []
    var freeWindows: [UInt32] = []
    var timers = DeadlineHeap()
    /// The heap is compacted (stale timers removed) when it grows past this, which is twice its
    /// live size at the last compaction: stale timers never outnumber live ones by much, and the
    /// O(n) compaction is paid for by the n timers pushed since.
    var compactionThreshold = 1024
    var dirtyDevices: [UInt32] = []
    var dirtyApps: [UInt32] = []
    var dirtyFetchApps: [UInt32] = []

    public internal(set) var deviceCount = 0
    public internal(set) var appCount = 0
    /// Held pushes over all devices.
    public internal(set) var heldCount = 0

    /// - Parameter expectedDevices: capacity reserved for devices and for as many apps, so a shard
    ///   loading a known population does not pay for array growth (and its slack).
    public init(
        configuration: SchedulerConfiguration = SchedulerConfiguration(),
        expectedDevices: Int = 0
    )
        throws(SchedulerConfigurationError)
    {
        try configuration.validate()
        install(configuration)
        devices.reserveCapacity(expectedDevices)
        apps.reserveCapacity(expectedDevices)
    }

    /// Makes a validated configuration the one in force, resolved into bucket units. Apps keep
    /// their policy index: `reconfigure` points them at their topic's new one.
    func install(_ configuration: SchedulerConfiguration) {
        self.configuration = configuration
        var policies = [ResolvedPolicy(configuration.global)]
        var indexByTopic: [String: UInt16] = [:]
        for topic in configuration.topics.keys.sorted() {
            indexByTopic[topic] = UInt16(policies.count)
            policies.append(ResolvedPolicy(configuration.policy(forTopic: topic)))
        }
        self.policies = policies
        self.policyIndexByTopic = indexByTopic
        deviceCapacity = UInt32(configuration.global.deviceBurst) * TokenBucket.unit
        deviceRate = UInt64(configuration.global.deviceRefillPerHour) * 1000
    }

    // MARK: Devices and apps

    /// A new device: disconnected, `awake`, with a full bucket.
    public func addDevice(now: Int64) -> DeviceHandle {
        deviceCount += 1
        if let slot = freeDevices.popLast() {
            let index = Int(slot)
            devices[index].bucketTime = now
            devices[index].budgetDue = DeviceSlot.noBudgetDue
            devices[index].bucketLevel = deviceCapacity
            devices[index].firstApp = noSlot
            devices[index].heldSilent = 0
            devices[index].heldRegular = 0
            devices[index].firstWindow = noSlot
            devices[index].isLive = true
            devices[index].connected = false
            devices[index].power = .awake
            return DeviceHandle(slot: slot, generation: devices[index].generation)
        }
        devices.append(
            DeviceSlot(
                bucketTime: now,
                budgetDue: DeviceSlot.noBudgetDue,
                bucketLevel: deviceCapacity,
                generation: 0,
                firstApp: noSlot,
                heldSilent: 0,
                heldRegular: 0,
                firstWindow: noSlot,
                isLive: true,
                connected: false,
                power: .awake,
                dirtyListed: false
            )
        )
        return DeviceHandle(slot: UInt32(devices.count - 1), generation: 0)
    }

    /// Removes the device and all its apps. Returns their held pushes, dropped as `unregistered`;
    /// empty for an unknown handle.
    public func removeDevice(_ device: DeviceHandle) -> [Drop] {
        guard let d = index(of: device) else { return [] }
        var drops: [Drop] = []
        while devices[d].firstApp != noSlot {
            removeApp(at: Int(devices[d].firstApp), drops: &drops)
        }
        forgetWindows(device: d) { _ in true }
        devices[d].isLive = false
        devices[d].connected = false
        devices[d].budgetDue = DeviceSlot.noBudgetDue
        devices[d].generation &+= 1
        freeDevices.append(UInt32(d))
        deviceCount -= 1
        return drops
    }

    /// Registers an app of `topic` on the device, with a full bucket and the topic's policy.
    /// Returns nil for an unknown device.
    public func addApp(device: DeviceHandle, topic: String) -> AppHandle? {
        guard let d = index(of: device) else { return nil }
        let policy = policyIndexByTopic[topic] ?? 0
        let record = AppSlot(
            bucketTime: 0,
            penaltyUntil: 0,
            lastBudgetAt: .min,
            bucketLevel: policies[Int(policy)].appCapacity,
            generation: 0,
            device: UInt32(d),
            nextSibling: devices[d].firstApp,
            silent: HeldList(),
            regular: HeldList(),
            policy: policy,
            fetch: FetchHistory(),
            fetchInterval: AppSlot.intervalMinimum,
            state: .foreground,
            isLive: true,
            dirtyListed: false,
            fetchDirtyListed: false
        )
        let slot: UInt32
        if let free = freeApps.popLast() {
            slot = free
            let old = apps[Int(slot)]
            apps[Int(slot)] = record
            apps[Int(slot)].generation = old.generation
            apps[Int(slot)].dirtyListed = old.dirtyListed
            apps[Int(slot)].fetchDirtyListed = old.fetchDirtyListed
        } else {
            slot = UInt32(apps.count)
            apps.append(record)
        }
        devices[d].firstApp = slot
        appCount += 1
        return AppHandle(slot: slot, generation: apps[Int(slot)].generation)
    }

    /// Unregisters the app. Returns its held pushes, dropped as `unregistered`; empty for an
    /// unknown handle.
    public func removeApp(_ app: AppHandle) -> [Drop] {
        guard let a = index(of: app) else { return [] }
        var drops: [Drop] = []
        let d = Int(apps[a].device)
        removeApp(at: a, drops: &drops)
        rescheduleBudget(device: d)
        return drops
    }

    private func removeApp(at a: Int, drops: inout [Drop]) {
        dropAll(of: a, silent: true, reason: .unregistered, into: &drops)
        dropAll(of: a, silent: false, reason: .unregistered, into: &drops)
        let d = Int(apps[a].device)
        let slot = UInt32(a)
        forgetWindows(device: d) { $0.app == slot }
        if devices[d].firstApp == slot {
            devices[d].firstApp = apps[a].nextSibling
        } else {
            var sibling = Int(devices[d].firstApp)
            while apps[sibling].nextSibling != slot { sibling = Int(apps[sibling].nextSibling) }
            apps[sibling].nextSibling = apps[a].nextSibling
        }
        apps[a].isLive = false
        apps[a].generation &+= 1
        freeApps.append(slot)
        appCount -= 1
    }

    // MARK: Handles

    func index(of device: DeviceHandle) -> Int? {
        let d = Int(device.slot)
        guard d < devices.count, devices[d].isLive, devices[d].generation == device.generation else { return nil }
        return d
    }

    func index(of app: AppHandle) -> Int? {
        let a = Int(app.slot)
        guard a < apps.count, apps[a].isLive, apps[a].generation == app.generation else { return nil }
        return a
    }

    func deviceHandle(_ d: Int) -> DeviceHandle {
        DeviceHandle(slot: UInt32(d), generation: devices[d].generation)
    }

    func appHandle(_ a: Int) -> AppHandle {
        AppHandle(slot: UInt32(a), generation: apps[a].generation)
    }

    func policy(ofApp a: Int) -> ResolvedPolicy {
        policies[Int(apps[a].policy)]
    }
}

@available(*, unavailable)
extension Scheduler: Sendable {}
