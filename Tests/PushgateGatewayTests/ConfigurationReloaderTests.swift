import Foundation
import Logging
import NIOPosix
import PushgateDelivery
import PushgateOperator
import PushgateProviderAuth
import PushgateStore
import PushgateStoreTestKit
import Testing

@testable import PushgateGateway

/// What a reload applies, what it leaves for a restart, and that a refused one changes nothing
/// (docs/configuration.md "Reloading"). The TLS and provider-key swaps against the real binary are
/// in the CLI tests (ReloadCLITests); the scheduler policy through the provider and device APIs
/// in SchedulerReloadTests.
@Suite("ConfigurationReloader")
struct ConfigurationReloaderTests {
    static func running() throws -> GatewayConfiguration {
        var configuration = GatewayConfiguration()
        try configuration.readPolicy()
        return configuration
    }

    static func reloads(_ metrics: GatewayMetrics) -> [String] {
        let text = String(decoding: metrics.exposition(statistics: DeliveryStatistics(), now: 0), as: UTF8.self)
        return text.split(separator: "\n").filter { $0.hasPrefix("pushgate_config_reloads_total{") }.map(String.init)
            .sorted()
    }

    /// What a reloader works on, as `Gateway.assemble` builds it, with a delivery core of one
    /// shard over an in-memory store, which has one device with an app of `topic`.
    struct World {
        static let topic = "com.example.app"
        let reloader: ConfigurationReloader
        let providers: ProviderAuthenticatorSource
        let metrics: GatewayMetrics
        let core: DeliveryCore
        let deviceID: String

        /// The app bucket's size on the device: the scheduler policy its shard runs.
        func appBurst() async throws -> Int? {
            try await core.inspect(deviceID: deviceID)?.registrations.first?.bucket.capacity
        }

        static func run(
            running: GatewayConfiguration,
            reread: @escaping @Sendable () throws -> GatewayConfiguration,
            _ body: (World) async throws -> Void
        ) async throws {
            let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
            let logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }
            do {
                let store = GroupCommitStore(backend: InMemoryBackend(), logger: logger)
                let core = try DeliveryCore(group: group, store: store, configuration: running.delivery, logger: logger)
                try await core.restore()
                let device = try await core.createDevice().get()
                _ = try await core.register(deviceID: device.deviceID, secret: device.secret, topic: topic).get()
                let metrics = GatewayMetrics(version: "test")
                let providers = ProviderAuthenticatorSource(running.access.providers)
                let reloader = ConfigurationReloader(
                    running: running,
                    reread: reread,
                    tls: nil,
                    providers: providers,
                    core: core,
                    metrics: metrics,
                    logger: logger
                )
                try await body(
                    World(
                        reloader: reloader,
                        providers: providers,
                        metrics: metrics,
                        core: core,
                        deviceID: device.deviceID
                    )
                )
            } catch {
                try await group.shutdownGracefully()
                throw error
            }
            try await group.shutdownGracefully()
        }
    }

    @Test(
        "the scheduler policy is applied to the shards; changed settings that only a restart applies are named and left as they are"
    )
    func restartOnly() async throws {
        let running = try Self.running()
        var fresh = GatewayConfiguration()
        fresh.threads = running.threads + 1
        fresh.logLevel = "debug"
        fresh.adminToken = "a new token"
        fresh.policy.scheduler.appBurst = 7
        try await World.run(running: running, reread: { [fresh] in fresh }) { (world: World) async throws in
            #expect(try await world.appBurst() == 3)
            let outcome = try await world.reloader.reload(trigger: "test").get()
            #expect(outcome.needsRestart == ["threads", "logLevel", "adminToken"])
            #expect(outcome.reloaded == ["providerKeys (0)", "scheduler"])
            #expect(try await world.appBurst() == 7, "the shard runs the new policy once the reload returns")
            #expect(world.providers.generation == 1, "the provider authentication was replaced (with the same keys)")
            #expect(
                Self.reloads(world.metrics) == [
                    #"pushgate_config_reloads_total{result="failure"} 0"#,
                    #"pushgate_config_reloads_total{result="success"} 1"#,
                ]
            )
            // Still named on the next reload: the running configuration kept its values.
            #expect(
                try await world.reloader.reload(trigger: "test").get().needsRestart == [
                    "threads", "logLevel", "adminToken",
                ]
            )
        }
    }

    @Test("a scheduler policy out of range refuses the whole reload, with its field and range, and changes nothing")
    func schedulerOutOfRange() async throws {
        let running = try Self.running()
        var fresh = GatewayConfiguration()
        fresh.policy.scheduler.appBurst = 7
        fresh.policy.scheduler.topics["com.example.news"] = SchedulerSettings.TopicOverrides(maxHeldPerApp: 0)
        try await World.run(running: running, reread: { [fresh] in fresh }) { (world: World) async throws in
            switch await world.reloader.reload(trigger: "test") {
            case .success(let outcome): Issue.record("reloaded: \(outcome)")
            case .failure(let failure):
                #expect(
                    failure.description.contains(#"topic "com.example.news": maxHeldPerApp is 0; allowed 1...1000"#),
                    "\(failure)"
                )
            }
            #expect(try await world.appBurst() == 3, "the global appBurst of the refused file was not applied either")
            #expect(world.providers.generation == 0)
            #expect(
                Self.reloads(world.metrics) == [
                    #"pushgate_config_reloads_total{result="failure"} 1"#,
                    #"pushgate_config_reloads_total{result="success"} 0"#,
                ]
            )
        }
    }

    @Test("a key file that cannot be read refuses the whole reload, names the file, is counted, and changes nothing")
    func unreadableKey() async throws {
        let running = try Self.running()
        var fresh = GatewayConfiguration()
        fresh.policy.providerKeys = [
            ProviderKeyConfiguration(
                teamID: "TEAM123456",
                keyID: "KEY1234567",
                privateKeyFile: "/nonexistent/AuthKey.p8",
                topics: ["com.example.app"]
            )
        ]
        fresh.policy.scheduler.appBurst = 7
        try await World.run(running: running, reread: { [fresh] in fresh }) { (world: World) async throws in
            switch await world.reloader.reload(trigger: "test") {
            case .success(let outcome): Issue.record("reloaded: \(outcome)")
            case .failure(let failure): #expect(failure.description.contains("/nonexistent/AuthKey.p8"), "\(failure)")
            }
            #expect(world.providers.generation == 0)
            #expect(try await world.appBurst() == 3)
            #expect(
                Self.reloads(world.metrics) == [
                    #"pushgate_config_reloads_total{result="failure"} 1"#,
                    #"pushgate_config_reloads_total{result="success"} 0"#,
                ]
            )
        }
    }

    @Test(
        "every setting is either applied by a reload (as the settings table says) or named when it changed and waits for a restart"
    )
    func everySettingIsAccountedFor() {
        let restartOnly = ConfigurationReloader.restartOnly(GatewayConfiguration()).map(\.key)
        let reloaded = Settings.all.filter(\.reloads).map(\.key)
        #expect(Set(restartOnly).isDisjoint(with: reloaded))
        // `config` names the file the others come from: a reload reads the same one.
        #expect(Set(restartOnly + reloaded) == Set(Settings.all.map(\.key)).subtracting(["config"]))
    }

    @Test("a settings problem on re-reading is refused with its words")
    func unreadableSettings() async throws {
        struct Problem: Error, CustomStringConvertible {
            var description: String { "pushgate.json:3:5: threads: is 0; must be 1 to 1024" }
        }
        try await World.run(running: try Self.running(), reread: { throw Problem() }) { world in
            guard case .failure(let failure) = await world.reloader.reload(trigger: "test") else {
                Issue.record("a settings problem was not refused")
                return
            }
            #expect(failure.description.contains("threads: is 0"))
        }
    }
}
