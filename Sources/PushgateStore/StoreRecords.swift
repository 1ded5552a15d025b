import PushgateModel

/// Durable records (notifications are the model's `AcceptedPush`). Times are UNIX milliseconds.

public struct DeviceRecord: Sendable, Equatable {
    public var id: String
    /// SHA-256 of the device secret (the secret itself is never stored).
    public var secretHash: [UInt8]
    public var createdAt: Int64
    /// At least the highest sequence number ever assigned, including every seq still stored:
    /// new ones continue above it, so a seq an agent has seen is never reused. The store owns
    /// this on load (callers add nothing): it folds the level that `reserveSeqs` (and `remove`,
    /// for a notification leaving without an ack) raises with the stored notifications' seqs
    /// (and SQLite with the ack level that databases written before reservations kept).
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
    public var appState: AppState?
    /// An APNs registration, or a Web Push subscription (whose `topic` is its name).
    public var kind: RegistrationKind
    /// A Web Push subscription restricted to an application server (RFC 8292 section 4): its
    /// public key, an uncompressed P-256 point. Nil otherwise.
    public var applicationServerKey: [UInt8]?

    public init(
        token: String,
        deviceID: String,
        topic: String,
        createdAt: Int64,
        unregisteredAt: Int64? = nil,
        appState: AppState? = nil,
        kind: RegistrationKind = .apns,
        applicationServerKey: [UInt8]? = nil
    ) {
        self.token = token
        self.deviceID = deviceID
        self.topic = topic
        self.createdAt = createdAt
        self.unregisteredAt = unregisteredAt
        self.appState = appState
        self.kind = kind
        self.applicationServerKey = applicationServerKey
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

/// An app's background-fetch figures (the scheduler's `FetchSnapshot`, as stored).
public struct FetchStateRecord: Sendable, Equatable {
    public var token: String
    /// The last results, two bits each, newest lowest (the scheduler's `FetchHistory`).
    public var results: UInt32
    public var resultCount: Int
    public var penaltyUntil: Int64?
    public var interval: FetchInterval
    public var lastBudgetAt: Int64?

    public init(
        token: String,
        results: UInt32,
        resultCount: Int,
        penaltyUntil: Int64?,
        interval: FetchInterval,
        lastBudgetAt: Int64?
    ) {
        self.token = token
        self.results = results
        self.resultCount = resultCount
        self.penaltyUntil = penaltyUntil
        self.interval = interval
        self.lastBudgetAt = lastBudgetAt
    }
}

/// A fetch window a delivered silent push opened. Kept once closed (by a result or a timeout)
/// until its notification is acknowledged: a restart must not open a second window when the
/// unacknowledged push is written again.
public struct FetchWindowRecord: Sendable, Equatable {
    public var deviceID: String
    public var seq: UInt64
    public var token: String
    public var openedAt: Int64
    public var closed: Bool

    public init(deviceID: String, seq: UInt64, token: String, openedAt: Int64, closed: Bool = false) {
        self.deviceID = deviceID
        self.seq = seq
        self.token = token
        self.openedAt = openedAt
        self.closed = closed
    }
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
    /// The durable totals (`StoreCommand.addTotals`), by name.
    public var totals: [String: Int64]
    /// Ordered by token.
    public var fetchStates: [FetchStateRecord]
    /// Ordered by device id, then seq.
    public var fetchWindows: [FetchWindowRecord]

    public init(
        devices: [DeviceRecord],
        registrations: [RegistrationRecord],
        notifications: [AcceptedPush],
        maxAcceptanceID: UInt64,
        buckets: [BucketRecord] = [],
        totals: [String: Int64] = [:],
        fetchStates: [FetchStateRecord] = [],
        fetchWindows: [FetchWindowRecord] = []
    ) {
        self.devices = devices
        self.registrations = registrations
        self.notifications = notifications
        self.maxAcceptanceID = maxAcceptanceID
        self.buckets = buckets
        self.totals = totals
        self.fetchStates = fetchStates
        self.fetchWindows = fetchWindows
    }
}

extension StoreSnapshot {
    /// Commands that make an empty store hold this snapshot, but for `maxAcceptanceID` (which
    /// no command sets: a backend that copies a store records it itself). Each device's
    /// `lastSeq` is created as it was loaded (covering its stored seqs); registrations get their
    /// app state, and closed fetch windows are closed, by the commands that record them.
    public var recreatingCommands: [StoreCommand] {
        var commands: [StoreCommand] = []
        commands.reserveCapacity(devices.count + 2 * registrations.count + notifications.count + 8)
        commands += devices.map { .createDevice($0) }
        for registration in registrations {
            commands.append(.register(registration))
            if let state = registration.appState {
                commands.append(.setAppState(token: registration.token, state: state))
            }
        }
        commands += notifications.map { .enqueue($0) }
        if !buckets.isEmpty { commands.append(.saveBuckets(buckets)) }
        if !totals.isEmpty { commands.append(.addTotals(totals)) }
        if !fetchStates.isEmpty { commands.append(.saveFetchStates(fetchStates)) }
        if !fetchWindows.isEmpty { commands.append(.openFetchWindows(fetchWindows)) }
        for window in fetchWindows where window.closed {
            commands.append(.closeFetchWindows(deviceID: window.deviceID, seqs: [window.seq]))
        }
        return commands
    }
}
