import ArgumentParser
#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Logging
import NIOCore
import PushgateGateway
import PushgateStore
import PushgateTransport

struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Run the gateway.",
        discussion: """
            With no flags: cleartext HTTP/2 (prior knowledge) and HTTP/1.1 on 127.0.0.1:2197.
            SIGTERM or SIGINT drains in-flight requests and exits 0.
            """
    )

    @Option(name: .customLong("listen"), help: "Cleartext listener (h2c and HTTP/1.1 by sniffing), HOST:PORT. Repeatable.")
    var listen: [ListenAddress] = []

    @Option(name: .customLong("tls-listen"), help: "TLS listener (ALPN h2 and http/1.1), HOST:PORT. Repeatable; needs --tls-cert and --tls-key.")
    var tlsListen: [ListenAddress] = []

    @Option(name: .customLong("tls-cert"), help: "PEM certificate chain for TLS listeners, leaf first.")
    var tlsCert: String?

    @Option(name: .customLong("tls-key"), help: "PEM private key for TLS listeners.")
    var tlsKey: String?

    @Option(name: .customLong("tls-client-ca"), help: "PEM CA file: verify client certificates presented on TLS listeners.")
    var tlsClientCA: String?

    @Flag(name: .customLong("tls-require-client-cert"), help: "Refuse TLS clients without a certificate (needs --tls-client-ca).")
    var tlsRequireClientCert = false

    @Option(name: .customLong("config"), help: "JSON configuration file (provider keys, registration secret; see the README). Also PUSHGATE_CONFIG.")
    var configFile: String?

    @Option(
        name: .customLong("provider-key"),
        help: "A provider token key, TEAM:KEYID:FILE:TOPIC[,TOPIC...] (FILE: the .p8, or a PEM public key). Repeatable; adds to the config file's keys."
    )
    var providerKeys: [ProviderKeyFlag] = []

    @Option(name: .customLong("data-dir"), help: "Directory of the SQLite store (created if missing).")
    var dataDirectory: String = "./pushgate-data"

    @Option(name: .customLong("idle-timeout"), help: "Seconds a connection with no open stream is kept.")
    var idleTimeout: Int = 300

    @Option(name: .customLong("shutdown-timeout"), help: "Seconds in-flight requests get to finish on shutdown.")
    var shutdownTimeout: Int = 10

    @Option(name: .customLong("threads"), help: "Event-loop threads (default: one per core the process may run on).")
    var threads: Int = availableCores()

    @Option(
        name: .customLong("durability"),
        help: """
            fsync: a push or ack is answered 200 once committed and fsync'd (nothing answered is \
            lost). interval: answered once accepted in memory, committed every --commit-interval-ms; \
            a crash or power loss loses what was accepted since the last commit.
            """
    )
    var durability: DurabilityMode = .fsync

    @Option(name: .customLong("commit-interval-ms"), help: "With --durability interval: milliseconds between commits (the loss window).")
    var commitIntervalMilliseconds: Int = 1000

    @Option(
        name: .customLong("commit-linger-us"),
        help: "Microseconds a commit may wait for more pushes to share its fsync when they arrive faster than that (0: never)."
    )
    var commitLingerMicroseconds: Int = 1000

    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel: String = "info"

    @Option(
        name: .customLong("admin-listen"),
        help: "Admin listener (h2c and HTTP/1.1), HOST:PORT: /metrics, /v1/admin, /admin, /healthz and /readyz only. Repeatable."
    )
    var adminListen: [ListenAddress] = []

    @Option(
        name: .customLong("admin-token"),
        help: "Token for /metrics and /v1/admin (authorization: bearer TOKEN); visible in the process list, so prefer --admin-token-file or PUSHGATE_ADMIN_TOKEN. Without one, those routes answer loopback clients only."
    )
    var adminToken: String?

    @Option(name: .customLong("admin-token-file"), help: "File holding the admin token (surrounding blanks and newlines ignored).")
    var adminTokenFile: String?

    @Flag(
        name: .customLong("allow-insecure-cleartext"),
        help: "Serve --listen and --admin-listen off loopback in cleartext anyway (secrets then cross the network unencrypted): for a network you trust. Without it such a listener is refused."
    )
    var allowInsecureCleartext = false

    @Flag(
        name: .customLong("admin-only-on-admin-listener"),
        help: "Serve /metrics, /v1/admin and /admin on the admin listeners only (the main listeners keep /healthz and /readyz)."
    )
    var adminOnlyOnAdminListener = false

    @Flag(
        name: .customLong("metrics-topic-labels"),
        help: "Add per-topic gauges to /metrics (registrations; held, stored, unacked), for the 100 topics with the most held."
    )
    var metricsTopicLabels = false

    func validate() throws {
        do {
            try gatewayConfiguration.validate()
        } catch {
            throw ValidationError(error.description)
        }
    }

    func run() async throws {
        let configuration = gatewayConfiguration
        let level = Logger.Level(rawValue: configuration.logLevel) ?? .info
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        do {
            try await Gateway.run(configuration, logger: Logger(label: "pushgate")) { listeners in
                // One line per listener on stdout, so scripts (and tests binding port 0) learn
                // the real addresses.
                func url(_ address: SocketAddress, tls: Bool) -> String {
                    let host = address.ipAddress.map { address.protocol == .inet6 ? "[\($0)]" : $0 } ?? "?"
                    return "\(tls ? "https" : "http")://\(host):\(address.port ?? 0)"
                }
                for (address, isTLS) in listeners.main { print("listening \(url(address, tls: isTLS))") }
                for address in listeners.admin { print("admin listening \(url(address, tls: false))") }
                fflush(nil)  // all streams: `stdout` itself is not concurrency-safe to name
            }
        } catch let error as GatewayConfigurationError {
            // A setting that cannot run is a usage error, as the flags' own checks are.
            throw ValidationError(error.description)
        }
    }

    private var gatewayConfiguration: GatewayConfiguration {
        var configuration = GatewayConfiguration()
        configuration.listen = listen
        configuration.tlsListen = tlsListen
        configuration.tlsCertificateChain = tlsCert
        configuration.tlsPrivateKey = tlsKey
        configuration.tlsClientCA = tlsClientCA
        configuration.tlsRequireClientCertificate = tlsRequireClientCert
        configuration.dataDirectory = dataDirectory
        configuration.idleTimeoutSeconds = idleTimeout
        configuration.shutdownTimeoutSeconds = shutdownTimeout
        configuration.threads = threads
        switch durability {
        case .fsync: configuration.durability = .fsync
        case .interval: configuration.durability = .interval(nanoseconds: UInt64(max(commitIntervalMilliseconds, 0)) * 1_000_000)
        }
        configuration.commitLingerMicroseconds = commitLingerMicroseconds
        configuration.logLevel = logLevel
        let environment = ProcessInfo.processInfo.environment
        configuration.adminListen = adminListen
        configuration.adminTokenFile = adminTokenFile
        // The environment's token yields to either flag.
        configuration.adminToken = adminToken ?? (adminTokenFile == nil ? environment["PUSHGATE_ADMIN_TOKEN"] : nil)
        configuration.adminOnlyOnAdminListener = adminOnlyOnAdminListener
        configuration.allowInsecureCleartext = allowInsecureCleartext
        configuration.metricsTopicLabels = metricsTopicLabels
        configuration.policySources = .init(
            configurationFile: configFile ?? environment["PUSHGATE_CONFIG"],
            providerKeys: providerKeys.map(\.configuration),
            environment: environment
        )
        return configuration
    }
}

enum DurabilityMode: String, ExpressibleByArgument, CaseIterable {
    case fsync, interval
}
