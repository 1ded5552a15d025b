import Foundation
import PushgateProviderAuth
import PushgateScheduler

/// The configuration file (`serve --config`): JSON, for what is too structured for flags. Flags
/// given on the command line win over the file.
///
/// ```json
/// {
///   "providerKeys": [
///     {"teamId": "TEAM123456", "keyId": "KEY1234567", "privateKeyFile": "AuthKey_KEY1234567.p8",
///      "topics": ["com.example.app"], "environment": "production"}
///   ],
///   "environment": "production",
///   "registrationSecret": "a long random string",
///   "maxConsecutiveProviderErrors": 100,
///   "scheduler": {
///     "appBurst": 3, "appRefillPerHour": 3, "deviceBurst": 10, "deviceRefillPerHour": 10,
///     "maxHeldPerApp": 8, "maxDeferralSeconds": 900, "defaultExpirationSeconds": 2592000,
///     "fetchWindowSeconds": 30, "timeoutPenaltySeconds": 86400, "minRefillPerHour": 1,
///     "topics": {"com.example.news": {"appBurst": 6, "appRefillPerHour": 6}}
///   }
/// }
/// ```
/// Relative key file names are resolved against the file's own directory.
public struct ConfigurationFile: Decodable, Sendable {
    public var providerKeys: [ProviderKeyConfiguration]?
    /// The APNs environment this gateway stands for ("development" or "production"): keys
    /// configured for the other one are refused with `BadEnvironmentKeyIdInToken`.
    public var environment: String?
    public var registrationSecret: String?
    public var maxConsecutiveProviderErrors: Int?
    public var scheduler: SchedulerSection?

    /// The scheduler's policy (PRODUCT.md section 4); absent fields keep their defaults. Per
    /// topic: the app's fields only (the device bucket is shared by every app of a device).
    public struct SchedulerSection: Decodable, Sendable {
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
        var topics: [String: TopicSection]?

        struct TopicSection: Decodable, Sendable {
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
            typealias Limits = SchedulerPolicy.Limits
            var global = SchedulerPolicy()
            if let appBurst { global.appBurst = appBurst }
            if let appRefillPerHour { global.appRefillPerHour = appRefillPerHour }
            if let deviceBurst { global.deviceBurst = deviceBurst }
            if let deviceRefillPerHour { global.deviceRefillPerHour = deviceRefillPerHour }
            if let maxHeldPerApp { global.maxHeldPerApp = maxHeldPerApp }
            if let millis = try Self.millis("maxDeferralSeconds", maxDeferralSeconds, Limits.maxDeferralMillis, topic: nil) {
                global.maxDeferralMillis = millis
            }
            if let millis = try Self.millis("defaultExpirationSeconds", defaultExpirationSeconds, Limits.defaultExpirationMillis, topic: nil) {
                global.defaultExpirationMillis = millis
            }
            if let millis = try Self.millis("fetchWindowSeconds", fetchWindowSeconds, Limits.fetchWindowMillis, topic: nil) {
                global.fetchWindowMillis = millis
            }
            if let millis = try Self.millis("timeoutPenaltySeconds", timeoutPenaltySeconds, Limits.timeoutPenaltyMillis, topic: nil) {
                global.timeoutPenaltyMillis = millis
            }
            if let minRefillPerHour { global.minRefillPerHour = minRefillPerHour }
            var overrides: [String: TopicPolicyOverride] = [:]
            // Sorted: the same file always reports the same error. The seconds fields (global,
            // then by topic) are checked before the policy's own checks of everything else.
            for (topic, section) in (topics ?? [:]).sorted(by: { $0.key < $1.key }) {
                overrides[topic] = TopicPolicyOverride(
                    appBurst: section.appBurst,
                    appRefillPerHour: section.appRefillPerHour,
                    maxHeldPerApp: section.maxHeldPerApp,
                    maxDeferralMillis: try Self.millis("maxDeferralSeconds", section.maxDeferralSeconds, Limits.maxDeferralMillis, topic: topic),
                    defaultExpirationMillis: try Self.millis(
                        "defaultExpirationSeconds", section.defaultExpirationSeconds, Limits.defaultExpirationMillis, topic: topic
                    ),
                    fetchWindowMillis: try Self.millis("fetchWindowSeconds", section.fetchWindowSeconds, Limits.fetchWindowMillis, topic: topic),
                    timeoutPenaltyMillis: try Self.millis(
                        "timeoutPenaltySeconds", section.timeoutPenaltySeconds, Limits.timeoutPenaltyMillis, topic: topic
                    ),
                    minRefillPerHour: section.minRefillPerHour
                )
            }
            let configuration = SchedulerConfiguration(global: global, topics: overrides)
            try configuration.validate()
            return configuration
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

    public static func load(path: String) throws(ConfigurationFileError) -> ConfigurationFile {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw ConfigurationFileError(path: path, problem: "cannot be read (\(error.localizedDescription))")
        }
        do {
            return try JSONDecoder().decode(ConfigurationFile.self, from: data)
        } catch let DecodingError.keyNotFound(key, context) {
            throw ConfigurationFileError(path: path, problem: "missing \"\(Self.path(context.codingPath + [key]))\"")
        } catch let DecodingError.typeMismatch(_, context) {
            throw ConfigurationFileError(path: path, problem: "wrong type at \"\(Self.path(context.codingPath))\": \(context.debugDescription)")
        } catch let DecodingError.valueNotFound(_, context) {
            throw ConfigurationFileError(path: path, problem: "null at \"\(Self.path(context.codingPath))\"")
        } catch {
            throw ConfigurationFileError(path: path, problem: "is not valid JSON (\(error))")
        }
    }

    private static func path(_ keys: [any CodingKey]) -> String {
        keys.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }.joined(separator: ".")
    }
}

public struct ConfigurationFileError: Error, CustomStringConvertible {
    public var path: String
    public var problem: String
    public var description: String { "configuration file \(path): \(problem)" }
}
