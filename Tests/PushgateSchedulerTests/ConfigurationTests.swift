import PushgateModel
import Testing

@testable import PushgateScheduler

@Suite struct ConfigurationTests {
    @Test func defaultsAreTheProductContract() {
        let policy = SchedulerPolicy()
        #expect(policy.appBurst == 3)
        #expect(policy.appRefillPerHour == 3)
        #expect(policy.deviceBurst == 10)
        #expect(policy.deviceRefillPerHour == 10)
        #expect(policy.maxHeldPerApp == 8)
        #expect(policy.maxDeferralMillis == 15 * minute)
        #expect(policy.defaultExpirationMillis == 30 * day)
        #expect(throws: Never.self) { try SchedulerConfiguration().validate() }
    }

    @Test func overridesChangeOnlyTheirFields() {
        let configuration = SchedulerConfiguration(
            topics: ["com.example.news": TopicPolicyOverride(appBurst: 5, maxDeferralMillis: minute)]
        )
        let news = configuration.policy(forTopic: "com.example.news")
        #expect(news.appBurst == 5)
        #expect(news.maxDeferralMillis == minute)
        #expect(news.appRefillPerHour == 3)
        #expect(news.maxHeldPerApp == 8)
        #expect(configuration.policy(forTopic: "com.example.other") == SchedulerPolicy())
    }

    @Test func globalErrorNamesFieldValueAndRange() {
        var configuration = SchedulerConfiguration()
        configuration.global.deviceRefillPerHour = 0
        #expect(
            throws: SchedulerConfigurationError(
                topic: nil,
                field: "deviceRefillPerHour",
                value: 0,
                allowed: 1...3_600_000
            )
        ) {
            try configuration.validate()
        }
        let error = SchedulerConfigurationError(
            topic: nil,
            field: "deviceRefillPerHour",
            value: 0,
            allowed: 1...3_600_000
        )
        #expect(error.description == "global scheduler policy: deviceRefillPerHour is 0; allowed 1...3600000")
    }

    @Test(
        "every field out of range is named once: a wrong global value not again for each topic inheriting it, a topic's own wrong value for the topic"
    )
    func everyProblemOnce() {
        var configuration = SchedulerConfiguration(
            topics: [
                "com.example.inherits": TopicPolicyOverride(maxHeldPerApp: 5),
                "com.example.own": TopicPolicyOverride(appBurst: 2000, maxHeldPerApp: 0),
            ]
        )
        configuration.global.appBurst = 0
        configuration.global.deviceBurst = 0
        let named = configuration.problems().map { "\($0.topic ?? "global") \($0.field) \($0.value)" }
        #expect(
            named == [
                "global appBurst 0", "global deviceBurst 0", "com.example.own appBurst 2000",
                "com.example.own maxHeldPerApp 0",
            ]
        )
        #expect(throws: configuration.problems()[0]) { try configuration.validate() }
    }

    @Test func topicErrorNamesTheTopic() throws {
        let configuration = SchedulerConfiguration(
            topics: [
                "com.example.good": TopicPolicyOverride(appBurst: 4),
                "com.example.news": TopicPolicyOverride(maxHeldPerApp: 0),
            ]
        )
        do {
            try configuration.validate()
            Issue.record("validate() accepted maxHeldPerApp 0")
        } catch {
            #expect(error.topic == "com.example.news")
            #expect(error.field == "maxHeldPerApp")
            #expect(
                error.description
                    == "scheduler policy for topic \"com.example.news\": maxHeldPerApp is 0; allowed 1...1000"
            )
        }
    }

    @Test(arguments: [
        (SchedulerPolicy(appBurst: 0), "appBurst"),
        (SchedulerPolicy(appBurst: 1001), "appBurst"),
        (SchedulerPolicy(appRefillPerHour: -1), "appRefillPerHour"),
        (SchedulerPolicy(deviceBurst: 0), "deviceBurst"),
        (SchedulerPolicy(deviceRefillPerHour: 3_600_001), "deviceRefillPerHour"),
        (SchedulerPolicy(maxHeldPerApp: 0), "maxHeldPerApp"),
        (SchedulerPolicy(maxDeferralMillis: 0), "maxDeferralMillis"),
        (SchedulerPolicy(maxDeferralMillis: day + 1), "maxDeferralMillis"),
        (SchedulerPolicy(defaultExpirationMillis: -5), "defaultExpirationMillis"),
        (SchedulerPolicy(defaultExpirationMillis: 31 * day), "defaultExpirationMillis"),
    ])
    func everyFieldIsChecked(policy: SchedulerPolicy, field: String) {
        #expect(
            performing: { try SchedulerConfiguration(global: policy).validate() },
            throws: { error in
                (error as? SchedulerConfigurationError)?.field == field
            }
        )
    }

    @Test func boundsAreInclusive() {
        let policy = SchedulerPolicy(
            appBurst: 1000,
            appRefillPerHour: 1,
            deviceBurst: 1,
            deviceRefillPerHour: 3_600_000,
            maxHeldPerApp: 1000,
            maxDeferralMillis: day,
            defaultExpirationMillis: 30 * day
        )
        #expect(throws: Never.self) { try SchedulerConfiguration(global: policy).validate() }
    }

    @Test func schedulerRefusesAnInvalidConfiguration() {
        #expect(throws: SchedulerConfigurationError.self) {
            _ = try Scheduler(configuration: SchedulerConfiguration(global: SchedulerPolicy(appBurst: 0)))
        }
    }

    @Test func appsGetTheirTopicsPolicy() throws {
        let harness = try Harness(
            SchedulerConfiguration(topics: ["com.example.news": TopicPolicyOverride(appBurst: 1)])
        )
        let news = harness.app("com.example.news")
        let other = harness.app("com.example.other")
        #expect(harness.scheduler.policy(of: news)?.appBurst == 1)
        #expect(harness.scheduler.policy(of: other)?.appBurst == 3)
        #expect(harness.exhaust(news, now: t0).delivered.count == 1)
        #expect(harness.exhaust(other, now: t0).delivered.count == 3)
    }
}
