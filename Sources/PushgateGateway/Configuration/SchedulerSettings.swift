import PushgateModel
import PushgateScheduler

/// The scheduler's policy (PRODUCT.md section 4) as given, in seconds where the settings have
/// seconds; absent fields keep their defaults. Per topic (file only): the app's fields only (the
/// device bucket is shared by every app of a device).
public struct SchedulerSettings: Sendable {
    var appBurst: Int?
    var appRefillPerHour: Int?
    var deviceBurst: Int?
    var deviceRefillPerHour: Int?
    var maxHeldPerApp: Int?
    var maxDeferralSeconds: Int64?
    var defaultExpirationSeconds: Int64?
    var fetchWindowSeconds: Int64?
    var timeoutPenaltySeconds: Int64?
    var minRefillPerHour: Int?
    var topics: [String: TopicOverrides] = [:]

    public struct TopicOverrides: Sendable {
        var appBurst: Int?
        var appRefillPerHour: Int?
        var maxHeldPerApp: Int?
        var maxDeferralSeconds: Int64?
        var defaultExpirationSeconds: Int64?
        var fetchWindowSeconds: Int64?
        var timeoutPenaltySeconds: Int64?
        var minRefillPerHour: Int?
    }

    /// Validated: a wrong value names its topic, field and allowed range, in the file's own
    /// terms (seconds where the file has seconds).
    public func configuration() throws(SchedulerConfigurationError) -> SchedulerConfiguration {
        let configuration = try assemble { field, seconds, allowed, topic throws(SchedulerConfigurationError) in
            try Self.millis(field, seconds, allowed, topic: topic)
        }
        try configuration.validate()
        return configuration
    }

    /// Every wrong value, in the order `configuration()` meets them, for `config check` to name
    /// each (a seconds field out of range is left at its default for the checks after it).
    public func problems() -> [SchedulerConfigurationError] {
        var found: [SchedulerConfigurationError] = []
        let configuration = assemble { field, seconds, allowed, topic in
            do throws(SchedulerConfigurationError) {
                return try Self.millis(field, seconds, allowed, topic: topic)
            } catch {
                found.append(error)
                return nil
            }
        }
        return found + configuration.problems()
    }

    private func assemble<E: Error>(
        millis: (String, Int64?, ClosedRange<Int64>, String?) throws(E) -> Int64?
    ) throws(E) -> SchedulerConfiguration {
        typealias Limits = SchedulerPolicy.Limits
        var global = SchedulerPolicy()
        if let appBurst { global.appBurst = appBurst }
        if let appRefillPerHour { global.appRefillPerHour = appRefillPerHour }
        if let deviceBurst { global.deviceBurst = deviceBurst }
        if let deviceRefillPerHour { global.deviceRefillPerHour = deviceRefillPerHour }
        if let maxHeldPerApp { global.maxHeldPerApp = maxHeldPerApp }
        if let millis = try millis("maxDeferralSeconds", maxDeferralSeconds, Limits.maxDeferralMillis, nil) {
            global.maxDeferralMillis = millis
        }
        if let millis = try millis(
            "defaultExpirationSeconds",
            defaultExpirationSeconds,
            Limits.defaultExpirationMillis,
            nil
        ) {
            global.defaultExpirationMillis = millis
        }
        if let millis = try millis("fetchWindowSeconds", fetchWindowSeconds, Limits.fetchWindowMillis, nil) {
            global.fetchWindowMillis = millis
        }
        if let millis = try millis("timeoutPenaltySeconds", timeoutPenaltySeconds, Limits.timeoutPenaltyMillis, nil) {
            global.timeoutPenaltyMillis = millis
        }
        if let minRefillPerHour { global.minRefillPerHour = minRefillPerHour }
        var overrides: [String: TopicPolicyOverride] = [:]
        // Sorted: the same file always reports the same error. The seconds fields (global,
        // then by topic) are checked before the policy's own checks of everything else.
        for (topic, section) in topics.sorted(by: { $0.key < $1.key }) {
            overrides[topic] = TopicPolicyOverride(
                appBurst: section.appBurst,
                appRefillPerHour: section.appRefillPerHour,
                maxHeldPerApp: section.maxHeldPerApp,
                maxDeferralMillis: try millis(
                    "maxDeferralSeconds",
                    section.maxDeferralSeconds,
                    Limits.maxDeferralMillis,
                    topic
                ),
                defaultExpirationMillis: try millis(
                    "defaultExpirationSeconds",
                    section.defaultExpirationSeconds,
                    Limits.defaultExpirationMillis,
                    topic
                ),
                fetchWindowMillis: try millis(
                    "fetchWindowSeconds",
                    section.fetchWindowSeconds,
                    Limits.fetchWindowMillis,
                    topic
                ),
                timeoutPenaltyMillis: try millis(
                    "timeoutPenaltySeconds",
                    section.timeoutPenaltySeconds,
                    Limits.timeoutPenaltyMillis,
                    topic
                ),
                minRefillPerHour: section.minRefillPerHour
            )
        }
        return SchedulerConfiguration(global: global, topics: overrides)
    }

    /// The policy counts milliseconds, this file seconds: a seconds field is checked here, in
    /// the file's terms (the whole seconds inside the policy's range), so that its error names
    /// the field, the value as written and the range in seconds.
    private static func millis(
        _ field: String,
        _ seconds: Int64?,
        _ allowedMillis: ClosedRange<Int64>,
        topic: String?
    ) throws(SchedulerConfigurationError) -> Int64? {
        guard let seconds else { return nil }
        let lower = allowedMillis.lowerBound
        let allowed = (lower / 1000 + (lower % 1000 > 0 ? 1 : 0))...(allowedMillis.upperBound / 1000)
        guard allowed.contains(seconds) else {
            throw SchedulerConfigurationError(topic: topic, field: field, value: seconds, allowed: allowed)
        }
        return seconds * 1000
    }
}

extension SettingValue {
    /// `scheduler.topics`: an object of topics, each an object of the app's policy fields.
    func topicOverrides() throws(SettingError) -> [String: SchedulerSettings.TopicOverrides] {
        guard case .node(let node) = input, case .object(let members) = node.value else {
            throw problem("must be an object of topics ({\"TOPIC\": {...}})")
        }
        var topics: [String: SchedulerSettings.TopicOverrides] = [:]
        for member in members {
            // A key no topic can equal would override nothing, silently.
            guard TopicRules.isValid(member.key) else {
                throw problem("\(setting.key) is keyed by topics, and \(TopicRules.explain(member.key))")
            }
            var object = try object(member.value, key: "\(setting.key).\(member.key)")
            topics[member.key] = SchedulerSettings.TopicOverrides(
                appBurst: try object.integer("appBurst"),
                appRefillPerHour: try object.integer("appRefillPerHour"),
                maxHeldPerApp: try object.integer("maxHeldPerApp"),
                maxDeferralSeconds: try object.integer("maxDeferralSeconds").map(Int64.init),
                defaultExpirationSeconds: try object.integer("defaultExpirationSeconds").map(Int64.init),
                fetchWindowSeconds: try object.integer("fetchWindowSeconds").map(Int64.init),
                timeoutPenaltySeconds: try object.integer("timeoutPenaltySeconds").map(Int64.init),
                minRefillPerHour: try object.integer("minRefillPerHour")
            )
            try object.finish()
        }
        return topics
    }
}
