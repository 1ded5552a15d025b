import Foundation
import Logging
import PushgateDelivery
import PushgateOperator
import PushgateProviderAuth
import Testing

@testable import PushgateGateway

/// What a reload applies, what it leaves for a restart, and that a refused one changes nothing
/// (README "Stopping and reloading"). The TLS and provider-key swaps against the real binary are
/// in the CLI tests (ReloadCLITests).
@Suite("ConfigurationReloader")
struct ConfigurationReloaderTests {
    static func running() throws -> GatewayConfiguration {
        var configuration = GatewayConfiguration()
        try configuration.readPolicy(logger: Logger(label: "test"))
        return configuration
    }

    static func reloads(_ metrics: GatewayMetrics) -> [String] {
        let text = String(decoding: metrics.exposition(statistics: DeliveryStatistics(), now: 0), as: UTF8.self)
        return text.split(separator: "\n").filter { $0.hasPrefix("pushgate_config_reloads_total{") }.map(String.init).sorted()
    }

    @Test("changed settings that only a restart applies are named, left as they are, and the reload succeeds")
    func restartOnly() throws {
        let running = try Self.running()
        var fresh = GatewayConfiguration()
        fresh.threads = running.threads + 1
        fresh.logLevel = "debug"
        fresh.adminToken = "a new token"
        fresh.policy.scheduler.appBurst = 7
        let metrics = GatewayMetrics(version: "test")
        let providers = ProviderAuthenticatorSource(running.access.providers)
        let reloader = ConfigurationReloader(
            running: running, reread: { [fresh] in fresh }, tls: nil, providers: providers, metrics: metrics, logger: Logger(label: "test")
        )
        let outcome = try reloader.reload(trigger: "test").get()
        #expect(outcome.needsRestart == ["threads", "logLevel", "adminToken", "scheduler"])
        #expect(outcome.reloaded == ["providerKeys (0)"])
        #expect(providers.generation == 1, "the provider authentication was replaced (with the same keys)")
        #expect(Self.reloads(metrics) == [#"pushgate_config_reloads_total{result="failure"} 0"#, #"pushgate_config_reloads_total{result="success"} 1"#])
        // Still named on the next reload: the running configuration kept its values.
        #expect(try reloader.reload(trigger: "test").get().needsRestart == ["threads", "logLevel", "adminToken", "scheduler"])
    }

    @Test("a key file that cannot be read refuses the whole reload, names the file, is counted, and changes nothing")
    func unreadableKey() throws {
        let running = try Self.running()
        var fresh = GatewayConfiguration()
        fresh.policy.providerKeys = [ProviderKeyConfiguration(teamID: "TEAM123456", keyID: "KEY1234567", privateKeyFile: "/nonexistent/AuthKey.p8", topics: ["com.example.app"])]
        let metrics = GatewayMetrics(version: "test")
        let providers = ProviderAuthenticatorSource(running.access.providers)
        let reloader = ConfigurationReloader(
            running: running, reread: { [fresh] in fresh }, tls: nil, providers: providers, metrics: metrics, logger: Logger(label: "test")
        )
        switch reloader.reload(trigger: "test") {
        case .success(let outcome): Issue.record("reloaded: \(outcome)")
        case .failure(let failure): #expect(failure.description.contains("/nonexistent/AuthKey.p8"), "\(failure)")
        }
        #expect(providers.generation == 0)
        #expect(Self.reloads(metrics) == [#"pushgate_config_reloads_total{result="failure"} 1"#, #"pushgate_config_reloads_total{result="success"} 0"#])
    }

    @Test("a settings problem on re-reading is refused with its words")
    func unreadableSettings() throws {
        struct Problem: Error, CustomStringConvertible { var description: String { "pushgate.json:3:5: threads: is 0; must be at least 1" } }
        let running = try Self.running()
        let reloader = ConfigurationReloader(
            running: running, reread: { throw Problem() }, tls: nil, providers: ProviderAuthenticatorSource(running.access.providers),
            metrics: GatewayMetrics(version: "test"), logger: Logger(label: "test")
        )
        #expect(throws: ConfigurationReloader.Failure.self) { try reloader.reload(trigger: "test").get() }
        if case .failure(let failure) = reloader.reload(trigger: "test") { #expect(failure.description.contains("threads: is 0")) }
    }
}
