import PushgateModel

/// Durable records (notifications are the model's `AcceptedPush`). Times are UNIX milliseconds.

public struct DeviceRecord: Sendable, Equatable {
    public var id: String
    /// SHA-256 of the device secret (the secret itself is never stored).
    public var secretHash: [UInt8]
    public var createdAt: Int64
    /// At least the highest sequence number ever assigned, including every seq still stored:
    /// new ones continue above it, so a seq an agent has seen is never reused. The store owns
    /// this on load (callers add nothing): SQLite folds the `last_seq` column that `reserveSeqs`
    /// (and `remove`, for a notification leaving without an ack) raises, the ack level that
    /// databases written before reservations kept, and the stored notifications' seqs.
    public var lastSeq: UInt64

    public init(id: String, secretHash: [UInt8], createdAt: Int64, lastSeq: UInt64 = 0) {
        self.id = id
        self.secretHash = secretHash
        self.createdAt = createdAt
        self.lastSeq = lastSeq
    }
}

public struct RegistrationRecord: Sendable, Equatable {
    /// 64 lowercase hex characters.
    public var token: String
    public var deviceID: String
    public var topic: String
    public var createdAt: Int64
    /// Set when unregistered (or its device deleted): providers get 410 with this time.
    public var unregisteredAt: Int64?
    /// The app state the device last reported (`foreground`, `background`, `terminated`); nil
    /// when it never reported one.
    public var appState: String?

    public init(
        token: String,
        deviceID: String,
        topic: String,
        createdAt: Int64,
        unregisteredAt: Int64? = nil,
        appState: String? = nil
    ) {
        self.token = token
        self.deviceID = deviceID
        self.topic = topic
        self.createdAt = createdAt
        self.unregisteredAt = unregisteredAt
        self.appState = appState
    }
}

/// A silent-push token bucket's level at a moment, so that a restart never refills budgets.
public struct BucketRecord: Sendable, Equatable {
    /// `device:<deviceId>` or `app:<token>`.
    public var key: String
    /// In the scheduler's units (1/3,600,000 token).
    public var level: UInt32
    /// Milliseconds since the epoch at which the bucket held `level`.
    public var at: Int64

    public init(key: String, level: UInt32, at: Int64) {
        self.key = key
        self.level = level
        self.at = at
    }

    public static func deviceKey(_ deviceID: String) -> String { "device:" + deviceID }
    public static func appKey(_ token: String) -> String { "app:" + token }
}

/// One change to durable state. A batch of commands is applied atomically.
public enum StoreCommand: Sendable, Equatable {
    case createDevice(DeviceRecord)
    /// Deletes the device and the notifications named (all of the device's: the caller knows
    /// them; the store has no index by device, see `SQLiteSchema` v4); its registrations are
    /// kept, marked unregistered at `at`, so that providers get 410 for its tokens.
    case deleteDevice(id: String, at: Int64, acceptanceIDs: [UInt64])
    case register(RegistrationRecord)
    case unregister(token: String, at: Int64)
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
    case setAppState(token: String, state: String)
}

/// Everything durable, as loaded at start.
public struct StoreSnapshot: Sendable, Equatable {
    public var devices: [DeviceRecord]
    public var registrations: [RegistrationRecord]
    /// Ordered by acceptanceID.
    public var notifications: [AcceptedPush]
    /// Highest acceptanceID ever stored (0 if none), so new ones continue above it.
    public var maxAcceptanceID: UInt64
    /// Ordered by key.
    public var buckets: [BucketRecord]

    public init(
        devices: [DeviceRecord],
        registrations: [RegistrationRecord],
        notifications: [AcceptedPush],
        maxAcceptanceID: UInt64,
        buckets: [BucketRecord] = []
    ) {
        self.devices = devices
        self.registrations = registrations
        self.notifications = notifications
        self.maxAcceptanceID = maxAcceptanceID
        self.buckets = buckets
    }
}

public struct StoreError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        /// More commands are waiting than the store accepts; retry later (maps to 503).
        case overloaded
        /// The database could not be opened, migrated, read or written.
        case database
        case closed
    }

    public var kind: Kind
    public var message: String

    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { message }
}

/// Durable state behind an interface, so that a PostgreSQL implementation shared by several
/// gateway nodes can replace SQLite later.
public protocol NotificationStore: Sendable {
    /// Applies `commands` atomically. `completion` runs (on a store thread) once they are on
    /// disk: committed and fsync'd. Concurrent calls share one transaction and one fsync (group
    /// commit). Never blocks the caller.
    func commit(_ commands: [StoreCommand], completion: @escaping @Sendable (Result<Void, StoreError>) -> Void)
    /// Reads everything; used once at start. Each device's `lastSeq` covers every seq it ever
    /// had, stored or gone: callers continue after it without looking at the notifications.
    func load() throws(StoreError) -> StoreSnapshot
    /// Finishes what was submitted, then closes. Later commits fail with `.closed`.
    func close() async
}

extension NotificationStore {
    public func commit(_ commands: [StoreCommand]) async throws(StoreError) {
        let result = await withCheckedContinuation { continuation in
            commit(commands) { continuation.resume(returning: $0) }
        }
        try result.get()
    }
}
