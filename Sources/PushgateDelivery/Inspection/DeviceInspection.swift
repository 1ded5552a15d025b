import PushgateModel

/// One device as the admin view explains it: its state, its buckets, and every notification it
/// has waiting with why it waits. Structured: the operator module puts it in words.
public struct DeviceInspection: Sendable, Equatable {
    public var deviceID: String
    public var connected: Bool
    /// Since when it has had no stream (when not connected).
    public var offlineSince: Int64
    public var power: DevicePower
    public var bucket: Bucket
    public var registrations: [Registration]
    /// Held, stored and unacked, in acceptance order.
    public var notifications: [Waiting]
    /// Bytes written to its stream and not yet acknowledged.
    public var unackedBytes: Int

    /// A silent-push token bucket now.
    public struct Bucket: Sendable, Equatable {
        /// Whole and fractional tokens.
        public var tokens: Double
        public var capacity: Int
        /// The refill now: an app's is scaled by its fetch results (see `Fetch`).
        public var refillPerHour: Double
        /// When the next whole token is in; nil when the bucket is full.
        public var nextTokenAt: Int64?
    }

    public struct Registration: Sendable, Equatable {
        public var token: String
        /// An APNs app's topic, or a Web Push subscription's name.
        public var topic: String
        public var kind: RegistrationKind
        public var appState: AppState
        public var bucket: Bucket
        public var fetch: Fetch
    }

    /// What the app did with its wakes, and what that does to its refill.
    public struct Fetch: Sendable, Equatable {
        /// 0 to 1: the mean of the last results' weights (1 with none).
        public var score: Double
        /// Newest first, at most 16.
        public var results: [FetchResult]
        public var configuredRefillPerHour: Int
        public var minRefillPerHour: Int
        /// A running timeout penalty's end (the refill is halved until then).
        public var penaltyUntil: Int64?
        public var interval: FetchInterval
        /// When the interval next allows a budget release; nil when it does now.
        public var intervalReadyAt: Int64?
        /// Seqs whose fetch windows are open, with their ends.
        public var openWindows: [(seq: UInt64, until: Int64)]

        public init(
            score: Double,
            results: [FetchResult],
            configuredRefillPerHour: Int,
            minRefillPerHour: Int,
            penaltyUntil: Int64?,
            interval: FetchInterval,
            intervalReadyAt: Int64?,
            openWindows: [(seq: UInt64, until: Int64)]
        ) {
            self.score = score
            self.results = results
            self.configuredRefillPerHour = configuredRefillPerHour
            self.minRefillPerHour = minRefillPerHour
            self.penaltyUntil = penaltyUntil
            self.interval = interval
            self.intervalReadyAt = intervalReadyAt
            self.openWindows = openWindows
        }

        public static func == (lhs: Fetch, rhs: Fetch) -> Bool {
            lhs.score == rhs.score && lhs.results == rhs.results
                && lhs.configuredRefillPerHour == rhs.configuredRefillPerHour
                && lhs.minRefillPerHour == rhs.minRefillPerHour && lhs.penaltyUntil == rhs.penaltyUntil
                && lhs.interval == rhs.interval && lhs.intervalReadyAt == rhs.intervalReadyAt
                && lhs.openWindows.map(\.seq) == rhs.openWindows.map(\.seq)
                && lhs.openWindows.map(\.until) == rhs.openWindows.map(\.until)
        }
    }

    public enum State: String, Sendable, Equatable {
        case held, stored, unacked
    }

    public struct Waiting: Sendable, Equatable {
        public var notification: AcceptedPush
        public var state: State
        public var reason: WaitReason
    }

    /// Why a notification waits.
    public enum WaitReason: Sendable, Equatable {
        /// A Web Push message below the urgency the device's power state allows: it waits for
        /// the state (or its expiry); no wake event releases it.
        case belowUrgency(WebPushUrgency, power: DevicePower)
        /// No stream: held ones go out when it opens (`online`), stored ones first.
        case offline(since: Int64)
        /// Silent, in `lowPower`: only a wake event releases it.
        case lowPower
        /// Silent, behind older held silent pushes of its app (released oldest first).
        case behindOlderSilent(count: Int)
        /// Silent, its app's fetch interval is `never`: only a wake event releases it.
        case fetchIntervalNever
        /// Silent, its app's fetch interval allows the next budget release at this time.
        case fetchInterval(seconds: UInt32, until: Int64)
        case appBudgetEmpty(until: Int64)
        case deviceBudgetEmpty(until: Int64)
        /// Silent, both buckets hold a token: the scheduler's next budget check releases it.
        case releaseDue
        /// Priority 5 on a device that is not awake: a wake event, or this time, releases it.
        case deferred(until: Int64)
        /// Priority 1: only a wake event releases it.
        case waitsForWake
        /// Connected, queued behind the window of sent, unacknowledged bytes.
        case behindUnackedWindow(unackedBytes: Int)
        /// Written; the agent has not acknowledged it yet.
        case awaitingAck(inKeepaliveResponse: Bool)
    }
}
