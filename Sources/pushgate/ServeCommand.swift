import ArgumentParser
#if canImport(Glibc)
import Glibc
#endif
import Logging
import NIOCore
import NIOPosix
import PushgateDelivery
import Foundation
import PushgateGateway
import PushgateProviderAuth
import PushgateScheduler
import PushgateStore
import PushgateStoreSQLite
import PushgateTLS
import PushgateTransport
import ServiceLifecycle

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

    @Option(name: .customLong("threads"), help: "Event-loop threads (default: one per core).")
    var threads: Int = System.coreCount

    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel: String = "info"

    func validate() throws {
        if !tlsListen.isEmpty, tlsCert == nil || tlsKey == nil {
            throw ValidationError("--tls-listen needs --tls-cert and --tls-key")
        }
        if tlsListen.isEmpty, tlsCert != nil || tlsKey != nil || tlsClientCA != nil {
            throw ValidationError("--tls-cert, --tls-key and --tls-client-ca apply to TLS listeners; add --tls-listen HOST:PORT")
        }
        if tlsRequireClientCert, tlsClientCA == nil {
            throw ValidationError("--tls-require-client-cert needs --tls-client-ca")
        }
        if Logger.Level(rawValue: logLevel) == nil {
            throw ValidationError("--log-level must be one of: \(Logger.Level.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        if threads < 1 { throw ValidationError("--threads must be at least 1") }
        if idleTimeout < 1 { throw ValidationError("--idle-timeout must be at least 1 second") }
        if shutdownTimeout < 0 { throw ValidationError("--shutdown-timeout cannot be negative") }
    }

    func run() async throws {
        let level = Logger.Level(rawValue: logLevel) ?? .info
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "pushgate")

        var listeners: [ListenerConfiguration] = []
        let cleartext = listen.isEmpty && tlsListen.isEmpty ? [ListenAddress(host: "127.0.0.1", port: 2197)] : listen
        for address in cleartext {
            listeners.append(ListenerConfiguration(host: address.host, port: address.port))
        }
        if !tlsListen.isEmpty, let tlsCert, let tlsKey {
            let context = try TLSContext.server(
                TLSServerConfiguration(
                    certificateChainPath: tlsCert,
                    privateKeyPath: tlsKey,
                    clientCAPath: tlsClientCA,
                    requireClientCertificate: tlsRequireClientCert
                )
            )
            for address in tlsListen {
                listeners.append(ListenerConfiguration(host: address.host, port: address.port, tls: context))
            }
        }

        let file = try configurationFile()
        let access = try accessConfiguration(file: file, logger: logger)
        var delivery = DeliveryConfiguration()
        delivery.scheduler = try file?.scheduler?.configuration() ?? SchedulerConfiguration()
        try access.checkExposure(listenHosts: (cleartext + tlsListen).map(\.host))

        var configuration = HTTPServerConfiguration()
        configuration.http2.idleTimeout = .seconds(Int64(idleTimeout))
        configuration.http2.streamsUntilAuthorized = access.streamsUntilAuthorized

        let store = try SQLiteStore(directory: dataDirectory, logger: logger)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: threads)
        let readiness = Readiness()
        let core = try DeliveryCore(group: group, store: store, configuration: delivery, logger: logger)
        let server = HTTPServer(
            listeners: listeners,
            configuration: configuration,
            application: Gateway.makeRouter(readiness: readiness, core: core, access: access),
            group: group,
            logger: logger
        )
        let schemes = listeners.map { $0.tls == nil ? "http" : "https" }
        let gateway = GatewayService(
            server: server,
            core: core,
            store: store,
            readiness: readiness,
            shutdownDeadline: .seconds(Int64(shutdownTimeout)),
            logger: logger
        ) { addresses in
            // One line per listener on stdout, so scripts (and tests binding port 0) learn the
            // real addresses.
            for (scheme, address) in zip(schemes, addresses) {
                let host = address.ipAddress.map { address.protocol == .inet6 ? "[\($0)]" : $0 } ?? "?"
                print("listening \(scheme)://\(host):\(address.port ?? 0)")
            }
            fflush(nil)  // all streams: `stdout` itself is not concurrency-safe to name
        }
        let services = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: [.init(service: gateway)],
                gracefulShutdownSignals: [.sigterm, .sigint],
                logger: logger
            )
        )
        do {
            try await services.run()
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
        try await group.shutdownGracefully()
    }

    /// Provider keys (file, then flags), client certificates, the registration secret (file,
    /// then PUSHGATE_REGISTRATION_SECRET).
    private var configurationPath: String? { configFile ?? ProcessInfo.processInfo.environment["PUSHGATE_CONFIG"] }

    private func configurationFile() throws -> GatewayConfigurationFile? {
        try configurationPath.map { path throws(ConfigurationFileError) in try GatewayConfigurationFile.load(path: path) }
    }

    private func accessConfiguration(file: GatewayConfigurationFile?, logger: Logger) throws -> AccessConfiguration {
        let environment = ProcessInfo.processInfo.environment
        let path = configurationPath
        let directory = path.map { URL(fileURLWithPath: $0).deletingLastPathComponent().path }
        var gatewayEnvironment: ProviderEnvironment?
        if let name = file?.environment {
            guard let parsed = ProviderEnvironment(rawValue: name) else {
                throw ConfigurationFileError(path: path ?? "", problem: "environment must be \"development\" or \"production\", got \"\(name)\"")
            }
            gatewayEnvironment = parsed
        }
        var keys: [ProviderKey] = []
        for key in file?.providerKeys ?? [] { keys.append(try key.load(relativeTo: directory)) }
        for key in providerKeys { keys.append(try key.configuration.load()) }
        let keyring = try ProviderKeyring(keys: keys, environment: gatewayEnvironment)
        let secret = file?.registrationSecret ?? environment["PUSHGATE_REGISTRATION_SECRET"]
        if let secret, secret.count < 16 {
            throw ValidationError("the registration secret must be at least 16 characters")
        }
        let access = AccessConfiguration(
            providers: ProviderAuthenticator(keyring: keyring, acceptsClientCertificates: tlsClientCA != nil),
            registrationSecret: secret,
            maxConsecutiveProviderErrors: file?.maxConsecutiveProviderErrors ?? 100
        )
        logger.info(
            "access",
            metadata: [
                "providers.keys": "\(keyring.keys.map(\.keyID))",
                "providers.client_certificates": "\(tlsClientCA != nil)",
                "devices.registration_secret": "\(secret != nil)",
            ]
        )
        return access
    }
}
