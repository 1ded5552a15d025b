import PushgateModel

/// The scheduler's rules. The global policy also sets the device bucket, which every app on a device
/// shares; a topic override changes only what belongs to one app.
public struct SchedulerPolicy: Sendable, Hashable {
    /// Silent pushes one app (registration) may receive back to back when its bucket is full.
    public var appBurst: Int
    /// Whole tokens added to an app's bucket per hour.
    public var appRefillPerHour: Int
    /// Silent pushes one device may receive back to back, over all its apps.
    public var deviceBurst: Int
    /// Whole tokens added to a device's bucket per hour.
    public var deviceRefillPerHour: Int
    /// Held silent pushes kept per app; above it the oldest is dropped (`overflow`).
    public var maxHeldPerApp: Int
    /// Longest a priority-5 regular push waits for a wake event, from its acceptance.
    public var maxDeferralMillis: Int64
    /// Lifetime of a push sent without `apns-expiration`. The scheduler does not read it (every
    /// push arrives with its `expiresAt`); it lives here so that a topic can override it.
    public var defaultExpirationMillis: Int64
    /// How long an app woken by a silent push has to report its fetch result; no report by then
    /// counts as `timeout`.
    public var fetchWindowMillis: Int64
    /// After a timeout, the app's refill is halved for this long (from the window's end).
    public var timeoutPenaltyMillis: Int64
    /// The least refill results can bring an app's bucket down to (never above its
    /// `appRefillPerHour`: a topic configured below the floor keeps its own rate).
    public var minRefillPerHour: Int

    public init(
        appBurst: Int = 3,
        appRefillPerHour: Int = 3,
        deviceBurst: Int = 10,
        deviceRefillPerHour: Int = 10,
        maxHeldPerApp: Int = 8,
        maxDeferralMillis: Int64 = 15 * 60 * 1000,
        defaultExpirationMillis: Int64 = 30 * 24 * 3600 * 1000,
        fetchWindowMillis: Int64 = 30 * 1000,
        timeoutPenaltyMillis: Int64 = 24 * 3600 * 1000,
        minRefillPerHour: Int = 1
    ) {
        self.appBurst = appBurst
        self.appRefillPerHour = appRefillPerHour
        self.deviceBurst = deviceBurst
        self.deviceRefillPerHour = deviceRefillPerHour
        self.maxHeldPerApp = maxHeldPerApp
        self.maxDeferralMillis = maxDeferralMillis
        self.defaultExpirationMillis = defaultExpirationMillis
        self.fetchWindowMillis = fetchWindowMillis
        self.timeoutPenaltyMillis = timeoutPenaltyMillis
        self.minRefillPerHour = minRefillPerHour
    }

    /// What `validate()` accepts. Bursts stop at 1,000 because a bucket level is a `UInt32` in
    /// units of 1/3,600,000 token; rates stop at 1,000 per second; a deferral at one day; an
    /// expiration at APNs' own 30 days.
    public enum Limits {
        public static let burst: ClosedRange<Int64> = 1...1000
        public static let refillPerHour: ClosedRange<Int64> = 1...3_600_000
        public static let maxHeldPerApp: ClosedRange<Int64> = 1...1000
        public static let maxDeferralMillis: ClosedRange<Int64> = 1...(24 * 3600 * 1000)
        public static let defaultExpirationMillis: ClosedRange<Int64> = 1...(30 * 24 * 3600 * 1000)
        public static let fetchWindowMillis: ClosedRange<Int64> = 1000...(Int64(FetchWindow.maxSeconds) * 1000)
        public static let timeoutPenaltyMillis: ClosedRange<Int64> = 0...(30 * 24 * 3600 * 1000)
        public static let minRefillPerHour: ClosedRange<Int64> = 1...3_600_000
        /// Topics with an override: a policy index is a `UInt16` in every app's record.
        public static let topicOverrides: ClosedRange<Int64> = 0...65_534
    }
}

/// What one topic changes in the global policy; `nil` fields inherit it. The device bucket fields
/// are deliberately absent: that bucket is shared by all the apps of a device, so no single topic
/// can own its size or rate.
public struct TopicPolicyOverride: Sendable, Hashable {
    public var appBurst: Int?
    public var appRefillPerHour: Int?
    public var maxHeldPerApp: Int?
    public var maxDeferralMillis: Int64?
    public var defaultExpirationMillis: Int64?
    public var fetchWindowMillis: Int64?
    public var timeoutPenaltyMillis: Int64?
    public var minRefillPerHour: Int?

    public init(
        appBurst: Int? = nil,
        appRefillPerHour: Int? = nil,
        maxHeldPerApp: Int? = nil,
        maxDeferralMillis: Int64? = nil,
        defaultExpirationMillis: Int64? = nil,
        fetchWindowMillis: Int64? = nil,
        timeoutPenaltyMillis: Int64? = nil,
        minRefillPerHour: Int? = nil
    ) {
        self.appBurst = appBurst
        self.appRefillPerHour = appRefillPerHour
        self.maxHeldPerApp = maxHeldPerApp
        self.maxDeferralMillis = maxDeferralMillis
        self.defaultExpirationMillis = defaultExpirationMillis
        self.fetchWindowMillis = fetchWindowMillis
        self.timeoutPenaltyMillis = timeoutPenaltyMillis
        self.minRefillPerHour = minRefillPerHour
    }

    func applied(to base: SchedulerPolicy) -> SchedulerPolicy {
        var policy = base
        if let appBurst { policy.appBurst = appBurst }
        if let appRefillPerHour { policy.appRefillPerHour = appRefillPerHour }
        if let maxHeldPerApp { policy.maxHeldPerApp = maxHeldPerApp }
        if let maxDeferralMillis { policy.maxDeferralMillis = maxDeferralMillis }
        if let defaultExpirationMillis { policy.defaultExpirationMillis = defaultExpirationMillis }
        if let fetchWindowMillis { policy.fetchWindowMillis = fetchWindowMillis }
        if let timeoutPenaltyMillis { policy.timeoutPenaltyMillis = timeoutPenaltyMillis }
        if let minRefillPerHour { policy.minRefillPerHour = minRefillPerHour }
        return policy
    }
}

/// The global policy plus per-topic overrides.
public struct SchedulerConfiguration: Sendable, Hashable {
    public var global: SchedulerPolicy
    public var topics: [String: TopicPolicyOverride]

    public init(global: SchedulerPolicy = SchedulerPolicy(), topics: [String: TopicPolicyOverride] = [:]) {
        self.global = global
        self.topics = topics
    }

    /// The policy an app of `topic` gets: the global one with the topic's override applied.
    public func policy(forTopic topic: String) -> SchedulerPolicy {
        topics[topic]?.applied(to: global) ?? global
    }

    /// Checks every field of the global policy, then of each override (topics in sorted order, so
    /// the same file always reports the same first error).
    public func validate() throws(SchedulerConfigurationError) {
        if let first = problems().first { throw first }
    }

    /// Every field out of its range, in `validate()`'s order.
    public func problems() -> [SchedulerConfigurationError] {
        var found: [SchedulerConfigurationError] = []
        Self.check(global, topic: nil, into: &found)
        Self.field("topics", Int64(topics.count), SchedulerPolicy.Limits.topicOverrides, topic: nil, into: &found)
        // A topic's fields it does not override are the global ones, named once already, for
        // the global policy (an override of its own, even a wrong one, is named for the topic).
        for topic in topics.keys.sorted() {
            var ofTopic: [SchedulerConfigurationError] = []
            Self.check(policy(forTopic: topic), topic: topic, into: &ofTopic)
            found += ofTopic.filter { error in
                !found.contains { $0.topic == nil && $0.field == error.field && $0.value == error.value }
            }
        }
        return found
    }

    private static func check(
        _ policy: SchedulerPolicy,
        topic: String?,
        into found: inout [SchedulerConfigurationError]
    ) {
        typealias Limits = SchedulerPolicy.Limits
        func field(_ name: String, _ value: Int64, _ allowed: ClosedRange<Int64>, topic: String?) {
            Self.field(name, value, allowed, topic: topic, into: &found)
        }
        field("appBurst", Int64(policy.appBurst), Limits.burst, topic: topic)
        field("appRefillPerHour", Int64(policy.appRefillPerHour), Limits.refillPerHour, topic: topic)
        field("deviceBurst", Int64(policy.deviceBurst), Limits.burst, topic: topic)
        field("deviceRefillPerHour", Int64(policy.deviceRefillPerHour), Limits.refillPerHour, topic: topic)
        field("maxHeldPerApp", Int64(policy.maxHeldPerApp), Limits.maxHeldPerApp, topic: topic)
        field("maxDeferralMillis", policy.maxDeferralMillis, Limits.maxDeferralMillis, topic: topic)
        field(
            "defaultExpirationMillis",
            policy.defaultExpirationMillis,
            Limits.defaultExpirationMillis,
            topic: topic
        )
        field("fetchWindowMillis", policy.fetchWindowMillis, Limits.fetchWindowMillis, topic: topic)
        field("timeoutPenaltyMillis", policy.timeoutPenaltyMillis, Limits.timeoutPenaltyMillis, topic: topic)
        field("minRefillPerHour", Int64(policy.minRefillPerHour), Limits.minRefillPerHour, topic: topic)
    }

    private static func field(
        _ name: String,
        _ value: Int64,
        _ allowed: ClosedRange<Int64>,
        topic: String?,
        into found: inout [SchedulerConfigurationError]
    ) {
        if !allowed.contains(value) {
            found.append(SchedulerConfigurationError(topic: topic, field: name, value: value, allowed: allowed))
        }
    }
}

/// A configuration field out of its range. The description names where, what, the value and the
/// allowed range, e.g. `scheduler policy for topic "com.example.news": appBurst is 0; allowed 1...1000`.
public struct SchedulerConfigurationError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The topic whose override is wrong; nil for the global policy.
    public var topic: String?
    public var field: String
    public var value: Int64
    public var allowed: ClosedRange<Int64>

    public init(topic: String?, field: String, value: Int64, allowed: ClosedRange<Int64>) {
        self.topic = topic
        self.field = field
        self.value = value
        self.allowed = allowed
    }

    public var description: String {
        let place = topic.map { "scheduler policy for topic \"\($0)\"" } ?? "global scheduler policy"
        return "\(place): \(field) is \(value); allowed \(allowed.lowerBound)...\(allowed.upperBound)"
    }
}
