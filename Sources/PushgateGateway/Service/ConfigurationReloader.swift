import Logging
import NIOConcurrencyHelpers
import NIOCore
import PushgateDelivery
import PushgateOperator
import PushgateProviderAuth
import PushgateTLS

/// Reloads, on SIGHUP or `POST /v1/admin/reload`, what can change under open connections: the
/// TLS listeners' certificate and key (and their client CA file's contents), the provider
/// keys (the configuration file and the key files, with the APNs environment) and the
/// scheduler's policy (every shard's, on its own loop: `DeliveryCore.reconfigure`). The
/// settings are resolved again from the same flags, environment and file; nothing is applied
/// unless all of it loads and checks, so a bad file leaves the running configuration serving.
/// Settings read only at start (`restartOnly`) are reported when they changed and wait for a
/// restart.
public final class ConfigurationReloader: Sendable {
    /// Why a reload changed nothing.
    public struct Failure: Error, Sendable, CustomStringConvertible {
        public var description: String
    }

    /// What a reload applied, and the changed settings that wait for a restart (setting keys).
    public struct Outcome: Sendable {
        public var reloaded: [String]
        public var needsRestart: [String]
    }

    private let reread: @Sendable () throws -> GatewayConfiguration
    /// The configuration in force; its lock also keeps reloads one at a time.
    private let current: NIOLockedValueBox<GatewayConfiguration>
    private let tls: TLSContextSource?
    private let providers: ProviderAuthenticatorSource
    private let core: DeliveryCore
    private let metrics: GatewayMetrics
    private let logger: Logger

    /// `running`: the prepared configuration the gateway started with; `reread` resolves the
    /// settings again from their sources.
    init(
        running: GatewayConfiguration,
        reread: @escaping @Sendable () throws -> GatewayConfiguration,
        tls: TLSContextSource?,
        providers: ProviderAuthenticatorSource,
        core: DeliveryCore,
        metrics: GatewayMetrics,
        logger: Logger
    ) {
        self.current = NIOLockedValueBox(running)
        self.reread = reread
        self.tls = tls
        self.providers = providers
        self.core = core
        self.metrics = metrics
        self.logger = logger
    }

    /// Reads the files and applies them, or nothing; returns once every shard runs the new
    /// scheduler policy. Blocks on file reads: keep it off the event loops. `trigger` names the
    /// cause in the log (`SIGHUP`, `POST /v1/admin/reload`).
    public func reload(trigger: String) async -> Result<Outcome, Failure> {
        let applied = current.withLockedValue { running -> Result<(Outcome, EventLoopFuture<Void>), Failure> in
            do {
                let (next, context, outcome) = try self.next(after: running)
                // Queued on the shards under the lock, so that two reloads reach every shard in
                // the order they took it. The only step that can throw: first.
                let shards = try core.reconfigure(scheduler: next.delivery.scheduler)
                if let context { tls?.replace(with: context) }
                providers.replace(with: next.access.providers)
                running = next
                return .success((outcome, shards))
            } catch {
                return .failure(Failure(description: "\(error)"))
            }
        }
        if case .success((_, let shards)) = applied {
            // Fails only when the event loops are shutting down: then nothing is served anyway.
            try? await shards.get()
        }
        let result = applied.map(\.0)
        metrics.countReload(succeeded: (try? result.get()) != nil)
        switch result {
        case .success(let outcome):
            logger.info("access", metadata: current.withLockedValue { $0.access.logMetadata })
            var metadata: Logger.Metadata = [
                "reload.trigger": "\(trigger)", "reload.reloaded": "\(outcome.reloaded.joined(separator: ", "))",
            ]
            if !outcome.needsRestart.isEmpty {
                metadata["reload.needs_restart"] = "\(outcome.needsRestart.joined(separator: ", "))"
                logger.warning(
                    "configuration reloaded; changed settings that only a restart applies were left as they are",
                    metadata: metadata
                )
            } else {
                logger.notice("configuration reloaded", metadata: metadata)
            }
        case .failure(let failure):
            logger.error(
                "configuration reload refused; the running configuration keeps serving",
                metadata: ["reload.trigger": "\(trigger)", "reload.error": "\(failure.description)"]
            )
        }
        return result
    }

    /// The configuration a reload would run with: the running one with the reloadable settings
    /// taken from their sources again, their files read and the scheduler's policy checked.
    private func next(after running: GatewayConfiguration) throws -> (GatewayConfiguration, TLSContext?, Outcome) {
        let fresh = try reread()
        var next = running
        next.tlsCertificateChain = fresh.tlsCertificateChain
        next.tlsPrivateKey = fresh.tlsPrivateKey
        next.policy.providerKeys = fresh.policy.providerKeys
        next.policy.environment = fresh.policy.environment
        next.policy.scheduler = fresh.policy.scheduler
        let context = try next.tlsContext()
        try next.readPolicy()
        // Whether providers authenticate at all decides connection rules and exposure at start.
        if next.access.providers.isUnauthenticated != running.access.providers.isUnauthenticated {
            throw GatewayConfigurationError(
                next.access.providers.isUnauthenticated
                    ? "the reload would leave no provider key: a gateway that authenticates providers stops doing so only with a restart"
                    : "the reload would add the first provider key: a gateway that authenticates no provider starts doing so only with a restart"
            )
        }
        let before = Self.restartOnly(running)
        let after = Self.restartOnly(fresh)
        let needsRestart = zip(before, after).filter { $0.0.value != $0.1.value }.map(\.0.key)
        var reloaded = ["providerKeys (\(next.access.providers.keyring.keys.count))", "scheduler"]
        if context != nil { reloaded.insert("tlsCert, tlsKey", at: 0) }
        return (next, context, Outcome(reloaded: reloaded, needsRestart: needsRestart))
    }

    /// Settings the gateway reads only at start, by key, each as a value to compare (never
    /// logged: some are secrets).
    static func restartOnly(_ c: GatewayConfiguration) -> [(key: String, value: String)] {
        [
            ("listen", "\(c.listen)"), ("tlsListen", "\(c.tlsListen)"), ("adminListen", "\(c.adminListen)"),
            ("tlsClientCA", c.tlsClientCA ?? ""), ("tlsRequireClientCert", "\(c.tlsRequireClientCertificate)"),
            ("allowInsecureCleartext", "\(c.allowInsecureCleartext)"), ("dataDir", c.dataDirectory),
            ("databaseURL", c.databaseURL ?? ""),
            ("databaseStatementTimeoutMs", "\(c.databaseStatementTimeoutMilliseconds)"),
            ("nodeName", c.nodeName ?? ""), ("nodeAddress", c.nodeAddress ?? ""),
            ("idleTimeout", "\(c.idleTimeoutSeconds)"),
            ("unauthenticatedIdleTimeout", "\(c.unauthenticatedIdleTimeoutSeconds)"),
            ("connectionSetupTimeout", "\(c.connectionSetupTimeoutSeconds)"),
            ("requestTimeout", "\(c.requestTimeoutSeconds)"),
            ("writeStallTimeout", "\(c.writeStallTimeoutSeconds)"),
            ("heartbeatInterval", "\(c.delivery.heartbeatIntervalMillis / 1000)"),
            ("maxConnections", c.maxConnections.map(String.init) ?? "derived"),
            ("maxConnectionsPerAddress", "\(c.maxConnectionsPerAddress)"),
            ("deviceCreationsPerAddressPerHour", "\(c.deviceCreationsPerAddressPerHour)"),
            ("http2FloodBurst", "\(c.http2FloodBurst)"),
            ("http2FloodFramesPerSecond", "\(c.http2FloodFramesPerSecond)"),
            ("queuedNotificationBudgetBytes", "\(c.delivery.queuedNotificationBudgetBytes)"),
            ("shutdownTimeout", "\(c.shutdownTimeoutSeconds)"),
            ("requestBodyBudgetBytes", "\(c.requestBodyBudgetBytes)"),
            ("drainGraceSeconds", "\(c.drainGraceSeconds)"), ("threads", "\(c.threads)"),
            ("durability", c.durabilityMode.rawValue), ("commitIntervalMs", "\(c.commitIntervalMilliseconds)"),
            ("commitLingerUs", "\(c.commitLingerMicroseconds)"), ("logLevel", c.logLevel),
            ("logFormat", c.logFormat.rawValue),
            ("adminToken", c.adminToken ?? ""), ("adminOnlyOnAdminListener", "\(c.adminOnlyOnAdminListener)"),
            ("metricsTopicLabels", "\(c.metricsTopicLabels)"),
            ("registrationSecret", c.policy.registrationSecret ?? ""),
            ("maxConsecutiveProviderErrors", "\(c.policy.maxConsecutiveProviderErrors)"),
            ("maxQueuedPerDevice", "\(c.delivery.maxQueuedPerDevice)"),
            ("maxQueuedPerApp", "\(c.delivery.maxQueuedPerApp)"),
            ("maxExpirationSeconds", "\(c.delivery.maxExpirationMillis / 1000)"),
            ("maxRegistrationsPerDevice", "\(c.delivery.maxRegistrationsPerDevice)"),
            ("unregisteredRetentionSeconds", "\(c.delivery.unregisteredRetentionMillis / 1000)"),
            ("webpushOrigin", c.webpushOrigin ?? ""), ("webpushMaxTTLSeconds", "\(c.webpushMaxTTLSeconds)"),
        ]
    }
}
