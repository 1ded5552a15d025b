import NIOConcurrencyHelpers
import PushgateModel
import PushgateStore

/// What an in-memory database keeps between backends: a backend opened again on the same
/// storage sees everything committed before, as a restart would.
public final class InMemoryStorage: Sendable {
    fileprivate let tables = NIOLockedValueBox(Tables())

    public init() {}

    /// Who owns a device, as a cluster's database would say (`StoreCommand.fence` checks it);
    /// a device with no owner set here passes every fence, as in SQLite.
    public func setOwner(of device: String, lease: UInt64, epoch: UInt64) {
        tables.withLockedValue { $0.owners[device] = (lease, epoch) }
    }
}

/// A `StoreBackend` in memory, with the SQLite backend's semantics (the store conformance suite
/// runs against both): for tests that need a store but no database, and to show that the suite
/// and `GroupCommitStore` are not tied to SQLite.
public final class InMemoryBackend: StoreBackend {
    private let storage: InMemoryStorage

    public init(storage: InMemoryStorage = InMemoryStorage()) {
        self.storage = storage
    }

    public func load() -> StoreSnapshot {
        storage.tables.withLockedValue { $0.snapshot() }
    }

    /// A batch works on a copy of the tables and replaces them only if all its commands succeed;
    /// nothing here can fail a whole transaction.
    public func apply(_ group: [[StoreCommand]]) -> [Result<Void, StoreError>] {
        storage.tables.withLockedValue { committed in
            group.map { commands in
                var tables = committed
                do throws(StoreError) {
                    for command in commands {
                        try tables.apply(command)
                    }
                } catch {
                    return .failure(
                        StoreError(
                            error.kind == .fenced ? .fenced : .database,
                            "batch of \(commands.count) command(s) refused: \(error.message)"
                        )
                    )
                }
                committed = tables
                return .success(())
            }
        }
    }

    public func close() {}
}

/// The SQLite tables, keyed as SQLite keys them.
private struct Tables {
    /// `lastSeq` is the reservation (`last_seq`), without the stored seqs `snapshot()` folds in.
    var devices: [String: DeviceRecord] = [:]
    var registrations: [String: RegistrationRecord] = [:]
    var notifications: [UInt64: AcceptedPush] = [:]
    var buckets: [String: BucketRecord] = [:]
    var totals: [String: Int64] = [:]
    var fetchStates: [String: FetchStateRecord] = [:]
    var fetchWindows: [String: [UInt64: FetchWindowRecord]] = [:]
    /// Raised by committed enqueues only, never lowered.
    var maxAcceptanceID: UInt64 = 0
    /// Set by tests only (`InMemoryStorage.setOwner`).
    var owners: [String: (lease: UInt64, epoch: UInt64)] = [:]

    mutating func apply(_ command: StoreCommand) throws(StoreError) {
        func refuse(_ reason: String) -> StoreError {
            StoreError(.database, "\(command.summary): \(reason)")
        }
        func storable(_ value: UInt64, _ field: String) throws(StoreError) {
            if value > UInt64(Int64.max) {
                throw refuse("\(field) \(value) exceeds the largest storable value \(Int64.max)")
            }
        }

        switch command {
        case .createDevice(let device):
            try storable(device.lastSeq, "lastSeq")
            if devices[device.id] != nil { throw refuse("duplicate device id") }
            devices[device.id] = device

        case .deleteDevice(let id, let at, let acceptanceIDs):
            for acceptanceID in acceptanceIDs { notifications[acceptanceID] = nil }
            buckets[BucketRecord.deviceKey(id)] = nil
            fetchWindows[id] = nil
            for (token, registration) in registrations where registration.deviceID == id {
                buckets[BucketRecord.appKey(token)] = nil
                fetchStates[token] = nil
                if registration.unregisteredAt == nil { registrations[token]?.unregisteredAt = at }
            }
            devices[id] = nil

        case .register(var registration):
            if registrations[registration.token] != nil { throw refuse("duplicate token") }
            if registration.unregisteredAt == nil,
                registrations.values.contains(where: {
                    $0.deviceID == registration.deviceID && $0.topic == registration.topic && $0.unregisteredAt == nil
                })
            {
                throw refuse("the device has an active registration for the topic")
            }
            registration.appState = nil
            registrations[registration.token] = registration

        case .forgetRegistrations(let tokens):
            for token in tokens where registrations[token]?.unregisteredAt != nil { registrations[token] = nil }

        case .unregister(let token, let at):
            if registrations[token]?.unregisteredAt == nil { registrations[token]?.unregisteredAt = at }
            buckets[BucketRecord.appKey(token)] = nil
            fetchStates[token] = nil
            for (deviceID, windows) in fetchWindows {
                fetchWindows[deviceID] = windows.filter { $0.value.token != token }
            }

        case .enqueue(let notification):
            try storable(notification.acceptanceID, "acceptanceID")
            if let seq = notification.seq { try storable(seq, "seq") }
            if notifications[notification.acceptanceID] != nil { throw refuse("duplicate acceptance id") }
            notifications[notification.acceptanceID] = notification
            maxAcceptanceID = max(maxAcceptanceID, notification.acceptanceID)

        case .assignSeq(let acceptanceID, let seq):
            try storable(seq, "seq")
            try storable(acceptanceID, "acceptanceID")
            notifications[acceptanceID]?.seq = seq

        case .remove(let acceptanceIDs):
            for acceptanceID in acceptanceIDs {
                guard let removed = notifications.removeValue(forKey: acceptanceID) else { continue }
                if let seq = removed.seq, let lastSeq = devices[removed.deviceID]?.lastSeq {
                    devices[removed.deviceID]?.lastSeq = max(lastSeq, seq)
                }
            }

        case .ack(_, let acceptanceIDs):
            for acceptanceID in acceptanceIDs { notifications[acceptanceID] = nil }

        case .reserveSeqs(let deviceID, let through):
            try storable(through, "through")
            if let lastSeq = devices[deviceID]?.lastSeq {
                devices[deviceID]?.lastSeq = max(lastSeq, through)
            }

        case .saveBuckets(let levels):
            for bucket in levels { buckets[bucket.key] = bucket }

        case .setAppState(let token, let state):
            registrations[token]?.appState = state

        case .saveFetchStates(let states):
            for state in states { fetchStates[state.token] = state }

        case .openFetchWindows(let windows):
            for window in windows {
                try storable(window.seq, "seq")
                fetchWindows[window.deviceID, default: [:]][window.seq] = window
            }

        case .closeFetchWindows(let deviceID, let seqs):
            for seq in seqs { fetchWindows[deviceID]?[seq]?.closed = true }

        case .forgetFetchWindows(let deviceID, let seqs):
            for seq in seqs { fetchWindows[deviceID]?[seq] = nil }

        case .fence(let deviceID, let lease, let epoch):
            if let owner = owners[deviceID], owner != (lease, epoch) {
                throw StoreError(.fenced, "\(command.summary): owned by lease \(owner.lease) at epoch \(owner.epoch)")
            }

        case .addTotals(let counts):
            for (name, count) in counts {
                let (sum, overflow) = totals[name, default: 0].addingReportingOverflow(count)
                if overflow { throw refuse("total \(name) would overflow a signed 64-bit integer") }
                totals[name] = sum
            }
        }
    }

    func snapshot() -> StoreSnapshot {
        var maxSeqByDevice: [String: UInt64] = [:]
        for notification in notifications.values {
            if let seq = notification.seq, seq > maxSeqByDevice[notification.deviceID, default: 0] {
                maxSeqByDevice[notification.deviceID] = seq
            }
        }
        let devices = self.devices.values.map { device in
            var device = device
            device.lastSeq = max(device.lastSeq, maxSeqByDevice[device.id] ?? 0)
            return device
        }
        // SQLite's BINARY collation: byte order.
        func byteOrder(_ a: String, _ b: String) -> Bool { a.utf8.lexicographicallyPrecedes(b.utf8) }
        return StoreSnapshot(
            devices: devices.sorted { byteOrder($0.id, $1.id) },
            registrations: registrations.values.sorted { byteOrder($0.token, $1.token) },
            notifications: notifications.values.sorted { $0.acceptanceID < $1.acceptanceID },
            maxAcceptanceID: max(maxAcceptanceID, notifications.keys.max() ?? 0),
            buckets: buckets.values.sorted { byteOrder($0.key, $1.key) },
            totals: totals,
            fetchStates: fetchStates.values.sorted { byteOrder($0.token, $1.token) },
            fetchWindows: fetchWindows.keys.sorted(by: byteOrder).flatMap { deviceID in
                fetchWindows[deviceID]!.values.sorted { $0.seq < $1.seq }
            }
        )
    }
}
