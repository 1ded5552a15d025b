import PushgateModel

/// One change to durable state. A batch of commands is applied atomically.
///
/// What every backend does alike (the conformance suite checks it): commands that find nothing
/// to change (unregister of an unknown token, assignSeq or remove of an unknown acceptance id,
/// ack of an unknown device) succeed as no-ops; ids, seqs and times are stored as signed 64-bit
/// integers, so a larger value fails its batch, as does a duplicate device id, token or
/// acceptance id, or a second active registration of a device for one topic.
public enum StoreCommand: Sendable, Equatable {
    case createDevice(DeviceRecord)
    /// Deletes the device and the notifications named (all of the device's: the caller knows
    /// them; the store has no index by device, see the SQLite schema's v4); its registrations are
    /// kept, marked unregistered at `at`, so that providers get 410 for its tokens. Its buckets,
    /// fetch figures and fetch windows go.
    case deleteDevice(id: String, at: Int64, acceptanceIDs: [UInt64])
    /// Its `appState` is not recorded: `setAppState` does that.
    case register(RegistrationRecord)
    /// Its bucket, fetch figures and fetch windows go.
    case unregister(token: String, at: Int64)
    /// Unregistered registrations kept past their retention leave the store (an active one named
    /// here stays).
    case forgetRegistrations(tokens: [String])
    case enqueue(AcceptedPush)
    /// A held notification becomes deliverable with this sequence number.
    case assignSeq(acceptanceID: UInt64, seq: UInt64)
    /// Removes notifications that will never be delivered (expired, coalesced, overflow, ...).
    case remove(acceptanceIDs: [UInt64])
    /// Acknowledgement: deletes the notifications a cumulative ack of the device covered, named
    /// by acceptance id (the caller knows them; the store has no index by device). The seqs they
    /// had stay covered by the device's reservation (`reserveSeqs`), so an ack writes nothing
    /// else (no device row per ack).
    case ack(deviceID: String, acceptanceIDs: [UInt64])
    /// Records that seqs up to `through` may be in use (`last_seq`, never lowered): a restart
    /// continues after it, so a seq is never given twice, even once every notification that had
    /// one is gone. Reserved in blocks, so most pushes and acks need no device-row write.
    case reserveSeqs(deviceID: String, through: UInt64)
    /// Records silent-budget bucket levels (insert or replace).
    case saveBuckets([BucketRecord])
    /// Records an app's reported state.
    case setAppState(token: String, state: AppState)
    /// Adds each count to the durable total of its name (a new name starts at 0): the totals
    /// the admin API shows since the store was created, which survive restarts.
    case addTotals([String: Int64])
    /// Records apps' background-fetch figures (insert or replace).
    case saveFetchStates([FetchStateRecord])
    /// Records fetch windows opened by delivered silent pushes (insert or replace).
    case openFetchWindows([FetchWindowRecord])
    /// Marks a device's fetch windows closed (a result or a timeout counted).
    case closeFetchWindows(deviceID: String, seqs: [UInt64])
    /// Deletes a device's fetch windows, open or closed: their notifications were acknowledged.
    case forgetFetchWindows(deviceID: String, seqs: [UInt64])
    /// The batch applies only while the device is owned by `lease` at `epoch` and the lease is
    /// alive (several gateway nodes on one database: `PushgateCluster.OwnershipRules`), and
    /// holds the device so until the transaction ends; otherwise the batch fails with `.fenced`.
    /// A store of one gateway (SQLite) has no owners, and there it always holds.
    case fence(deviceID: String, lease: UInt64, epoch: UInt64)
}

extension StoreCommand {
    /// The device the command changes, when it names one (a log line's `device`).
    public var deviceID: String? {
        switch self {
        case .createDevice(let device): device.id
        case .deleteDevice(let id, _, _): id
        case .register(let registration): registration.deviceID
        case .enqueue(let notification): notification.deviceID
        case .ack(let deviceID, _), .reserveSeqs(let deviceID, _), .closeFetchWindows(let deviceID, _),
            .forgetFetchWindows(let deviceID, _), .fence(let deviceID, _, _):
            deviceID
        case .openFetchWindows(let windows): windows.first?.deviceID
        case .unregister, .forgetRegistrations, .assignSeq, .remove, .saveBuckets, .setAppState, .addTotals,
            .saveFetchStates:
            nil
        }
    }

    /// The push the command writes, when it is one (a log line's `apns-id`).
    public var apnsID: String? {
        if case .enqueue(let notification) = self { notification.push.apnsID } else { nil }
    }

    /// A short description for error messages: never the payload or secrets.
    public var summary: String {
        switch self {
        case .createDevice(let device):
            return "createDevice \(device.id)"
        case .deleteDevice(let id, _, let ids):
            return "deleteDevice \(id) (\(ids.count) notification(s))"
        case .register(let registration):
            return "register token \(registration.token) (device \(registration.deviceID), topic \(registration.topic))"
        case .unregister(let token, _):
            return "unregister token \(token)"
        case .forgetRegistrations(let tokens):
            return "forget \(tokens.count) unregistered registration(s)"
        case .enqueue(let n):
            return "enqueue acceptance id \(n.acceptanceID) (device \(n.deviceID), apns-id \(n.push.apnsID))"
        case .assignSeq(let acceptanceID, let seq):
            return "assignSeq \(seq) to acceptance id \(acceptanceID)"
        case .remove(let ids):
            return "remove \(ids.count) notification(s)"
        case .ack(let deviceID, let ids):
            return "ack device \(deviceID): delete \(ids.count) notification(s)"
        case .saveBuckets(let buckets):
            return "save \(buckets.count) bucket level(s)"
        case .setAppState(let token, let state):
            return "set app state of token \(token) to \(state.rawValue)"
        case .reserveSeqs(let deviceID, let through):
            return "reserve seqs of device \(deviceID) through \(through)"
        case .addTotals(let totals):
            return "add to \(totals.count) durable total(s)"
        case .saveFetchStates(let states):
            return "save \(states.count) fetch state(s)"
        case .openFetchWindows(let windows):
            return "open \(windows.count) fetch window(s)"
        case .closeFetchWindows(let deviceID, let seqs):
            return "close \(seqs.count) fetch window(s) of device \(deviceID)"
        case .forgetFetchWindows(let deviceID, let seqs):
            return "forget \(seqs.count) fetch window(s) of device \(deviceID)"
        case .fence(let deviceID, let lease, let epoch):
            return "fence device \(deviceID) to lease \(lease) at epoch \(epoch)"
        }
    }
}

extension StoreCommand {
    /// The highest acceptance id committed once `batches` are (`committed` before them), and
    /// whether those batches delete the row that holds it. Acceptance ids are never reused, so a
    /// backend records that id apart from the rows only in a transaction that deletes its row.
    public static func highestAcceptanceID(
        committing batches: some Collection<[StoreCommand]>,
        above committed: UInt64
    ) -> (id: UInt64, deleted: Bool) {
        var highest = committed
        for batch in batches {
            for case .enqueue(let notification) in batch where notification.acceptanceID > highest {
                highest = notification.acceptanceID
            }
        }
        for batch in batches {
            for command in batch {
                switch command {
                case .ack(_, let ids), .remove(let ids), .deleteDevice(_, _, let ids):
                    if ids.contains(highest) { return (highest, true) }
                default:
                    continue
                }
            }
        }
        return (highest, false)
    }
}
