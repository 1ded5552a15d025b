import PushgateModel

// Read-only views for the admin API. Each returns nil for an unknown handle.

extension Scheduler {
    /// Held pushes of the device, over all its apps.
    public func heldCount(device: DeviceHandle) -> Int? {
        index(of: device).map { Int(devices[$0].heldTotal) }
    }

    /// Held pushes of the app, silent and regular.
    public func heldCount(app: AppHandle) -> Int? {
        index(of: app).map { Int(apps[$0].silent.count + apps[$0].regular.count) }
    }

    /// The ids of the app's held pushes, silent and regular, in acceptance order.
    public func heldIDs(app: AppHandle) -> [UInt64]? {
        guard let a = index(of: app) else { return nil }
        var slots: [UInt32] = []
        appendSlots(of: apps[a].silent, to: &slots)
        appendSlots(of: apps[a].regular, to: &slots)
        return slots.map { held[Int($0)].id }.sorted()
    }

    /// The device bucket's level at `now`.
    public func bucket(device: DeviceHandle, now: Int64) -> BucketSnapshot? {
        guard let d = index(of: device) else { return nil }
        return BucketSnapshot(level: deviceLevel(d, now: now), at: max(now, devices[d].bucketTime))
    }

    /// The app bucket's level at `now`.
    public func bucket(app: AppHandle, now: Int64) -> BucketSnapshot? {
        guard let a = index(of: app) else { return nil }
        return BucketSnapshot(level: appLevel(a, now: now), at: max(now, apps[a].bucketTime))
    }

    /// A held push as the admin device view explains it.
    public struct HeldPush: Sendable, Equatable {
        public var id: UInt64
        /// In its app's silent queue, released by budget; else it waits for a wake event (or
        /// its deferral end). See `SchedulerPush.waitsForBudget`.
        public var waitsForBudget: Bool
        /// A priority-5 push's deferral end: released then as `budget` if the device is
        /// connected. Nil for the others.
        public var deferredUntil: Int64?
        /// Held pushes of the same app and class ahead of it that the power state allows (a
        /// silent push is released on budget only when it is the app's oldest of those).
        public var ahead: Int
        /// A Web Push message's urgency; nil for an APNs push.
        public var urgency: WebPushUrgency?
        /// A Web Push message below the urgency the device's power state allows: it waits for
        /// the state (or its expiry), and no wake event releases it.
        public var waitsForPowerState: Bool
    }

    /// The app's held pushes, silent first then regular, each in acceptance order.
    public func heldPushes(app: AppHandle) -> [HeldPush]? {
        guard let a = index(of: app) else { return nil }
        let minimum = devices[Int(apps[a].device)].power.minimumUrgency
        var result: [HeldPush] = []
        for list in [apps[a].silent, apps[a].regular] {
            var slot = list.head
            var ahead = 0
            while slot != noSlot {
                let record = held[Int(slot)]
                result.append(
                    HeldPush(
                        id: record.id,
                        waitsForBudget: record.isSilent,
                        deferredUntil: record.deadline == .max ? nil : record.deadline,
                        ahead: ahead,
                        urgency: record.urgency,
                        waitsForPowerState: !Self.allows(record, minimum)
                    )
                )
                // A Web Push message the power state does not allow holds nothing back.
                if Self.allows(record, minimum) { ahead += 1 }
                slot = record.next
            }
        }
        return result
    }

    /// When the app's bucket next holds a whole token (`now` when it does already).
    public func nextToken(app: AppHandle, now: Int64) -> Int64? {
        guard let a = index(of: app) else { return nil }
        return appTokenTime(a, now: now)
    }

    /// When the device's bucket next holds a whole token (`now` when it does already).
    public func nextToken(device: DeviceHandle, now: Int64) -> Int64? {
        guard let d = index(of: device) else { return nil }
        return TokenBucket.tokenTime(deviceLevel(d, now: now), at: now, milliPerHour: deviceRate)
    }

    public func isConnected(_ device: DeviceHandle) -> Bool? {
        index(of: device).map { devices[$0].connected }
    }

    public func power(_ device: DeviceHandle) -> DevicePower? {
        index(of: device).map { devices[$0].power }
    }

    /// The app's state as the scheduler applies it: `terminated` until a `foreground` report.
    /// The caller persists it and restores it with `setAppState`.
    public func appState(_ app: AppHandle) -> AppState? {
        index(of: app).map { apps[$0].state }
    }

    public func device(of app: AppHandle) -> DeviceHandle? {
        index(of: app).map { deviceHandle(Int(apps[$0].device)) }
    }

    /// The device's apps, most recently added first.
    public func apps(of device: DeviceHandle) -> [AppHandle]? {
        guard let d = index(of: device) else { return nil }
        var result: [AppHandle] = []
        var a = devices[d].firstApp
        while a != noSlot {
            result.append(appHandle(Int(a)))
            a = apps[Int(a)].nextSibling
        }
        return result
    }

    /// The policy the app's topic resolved to.
    public func policy(of app: AppHandle) -> SchedulerPolicy? {
        index(of: app).map { policy(ofApp: $0).policy }
    }

    /// Bytes reserved by the scheduler's arrays (records, free lists, timers, dirty lists), not
    /// counting collapse-id strings.
    public var storageBytes: Int {
        devices.capacity * MemoryLayout<DeviceSlot>.stride
            + apps.capacity * MemoryLayout<AppSlot>.stride
            + held.capacity * MemoryLayout<HeldSlot>.stride
            + windows.capacity * MemoryLayout<FetchWindowSlot>.stride
            + (freeDevices.capacity + freeApps.capacity + freeHeld.capacity + freeWindows.capacity)
            * MemoryLayout<UInt32>.stride
            + (dirtyDevices.capacity + dirtyApps.capacity + dirtyFetchApps.capacity) * MemoryLayout<UInt32>.stride
            + timers.timers.capacity * MemoryLayout<Timer>.stride
    }

    /// Record bytes of one device with one app, nothing held, buckets untouched.
    public static var idleDeviceRecordBytes: Int {
        MemoryLayout<DeviceSlot>.stride + MemoryLayout<AppSlot>.stride
    }
}

extension Scheduler {
    /// The acceptance time of the oldest priority-5 push still in its deferral (its deferral
    /// end less its app's maximum deferral); nil when none is. One pass over the held slots,
    /// reading two fields of each.
    public func oldestDeferredAcceptedAt() -> Int64? {
        var oldest: Int64?
        for index in held.indices where held[index].isLive && held[index].deadline != .max {
            let accepted = held[index].deadline - policy(ofApp: Int(held[index].app)).policy.maxDeferralMillis
            oldest = min(oldest ?? accepted, accepted)
        }
        return oldest
    }
}
