import Foundation
import Logging
import NIOCore
import NIOPosix
import PushgateDelivery
import PushgateProviderAuth
import PushgateStore
import PushgateTLS
import PushgateTransport

/// Everything a gateway runs with, however it was given: `serve` reads its flags into this, and
/// `Gateway.run` checks it, reads the policy sources and starts.
public struct GatewayConfiguration: Sendable {
    /// Cleartext listeners (h2c and HTTP/1.1 by sniffing); `127.0.0.1:2197` when no listener
    /// of either kind is given.
    public var listen: [ListenAddress] = []
    /// TLS listeners (ALPN h2 and http/1.1); they need a certificate chain and a key.
    public var tlsListen: [ListenAddress] = []
    /// PEM certificate chain (leaf first) and key of the TLS listeners.
    public var tlsCertificateChain: String?
    public var tlsPrivateKey: String?
    /// Verify client certificates against this CA; a client without one is still served.
    public var tlsClientCA: String?
    /// Refuse TLS clients without a valid certificate (needs `tlsClientCA`).
    public var tlsRequireClientCertificate = false
    /// The SQLite store's directory (created if missing).
    public var dataDirectory = "./pushgate-data"
    /// Seconds a connection with no open stream is kept.
    public var idleTimeoutSeconds = 300
    /// Seconds in-flight requests get to finish on shutdown.
    public var shutdownTimeoutSeconds = 10
    /// Event-loop threads.
    public var threads = availableCores()
    /// When a 200 may be sent: after the fsync (the default), or at once with commits at an
    /// interval (a crash loses up to an interval of accepted pushes and acks).
    public var durability = Durability.fsync
    /// How long a commit may wait for more pushes to share its fsync, in microseconds (0: never).
    public var commitLingerMicroseconds = 1000
    /// swift-log's level name.
    public var logLevel = "info"
    /// Admin listeners (h2c and HTTP/1.1): the operator routes only.
    public var adminListen: [ListenAddress] = []
    /// Serve cleartext (`listen`, `adminListen`) off loopback anyway: for a network the operator
    /// trusts (a private link, a mesh that encrypts). Without it such a listener is refused.
    public var allowInsecureCleartext = false
    /// The admin token; `adminTokenFile` instead names a file holding it. Without either, the
    /// operator routes answer loopback peers only.
    public var adminToken: String?
    public var adminTokenFile: String?
    /// The main listeners serve health and readiness but not the metrics, admin API and
    /// dashboard (which the admin listeners serve).
    public var adminOnlyOnAdminListener = false
    /// Per-topic gauges in the metrics (topics are not a bounded set).
    public var metricsTopicLabels = false
    /// Where who may use the gateway and the scheduler's policy come from. When set,
    /// `Gateway.run` reads them into `access` and `delivery` once the TLS files are loaded.
    public var policySources: PolicySources?
    public var access = AccessConfiguration()
    public var delivery = DeliveryConfiguration()

    public init() {}

    /// The configuration file, keys given as flags, and the environment (the registration
    /// secret, when the file has none).
    public struct PolicySources: Sendable {
        public var configurationFile: String?
        public var providerKeys: [ProviderKeyConfiguration]
        public var environment: [String: String]

        public init(configurationFile: String?, providerKeys: [ProviderKeyConfiguration], environment: [String: String]) {
            self.configurationFile = configurationFile
            self.providerKeys = providerKeys
            self.environment = environment
        }
    }

    /// The cleartext listeners, with the default when none of either kind is given.
    public var cleartextListeners: [ListenAddress] {
        listen.isEmpty && tlsListen.isEmpty ? [ListenAddress(host: "127.0.0.1", port: 2197)] : listen
    }

    /// What cannot run, said in the flags' terms, in the order `serve` has always checked it.
    public func validate() throws(GatewayConfigurationError) {
        if !tlsListen.isEmpty, tlsCertificateChain == nil || tlsPrivateKey == nil {
            throw GatewayConfigurationError("--tls-listen needs --tls-cert and --tls-key")
        }
        if tlsListen.isEmpty, tlsCertificateChain != nil || tlsPrivateKey != nil || tlsClientCA != nil {
            throw GatewayConfigurationError("--tls-cert, --tls-key and --tls-client-ca apply to TLS listeners; add --tls-listen HOST:PORT")
        }
        if tlsRequireClientCertificate, tlsClientCA == nil {
            throw GatewayConfigurationError("--tls-require-client-cert needs --tls-client-ca")
        }
        if Logger.Level(rawValue: logLevel) == nil {
            throw GatewayConfigurationError("--log-level must be one of: \(Logger.Level.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        if threads < 1 { throw GatewayConfigurationError("--threads must be at least 1") }
        if !(0...100_000).contains(commitLingerMicroseconds) {
            throw GatewayConfigurationError("--commit-linger-us must be between 0 and 100000 (0.1 s)")
        }
        if case .interval(let nanoseconds) = durability, !(1_000_000...60_000_000_000).contains(nanoseconds) {
            throw GatewayConfigurationError("--commit-interval-ms must be between 1 and 60000")
        }
        if idleTimeoutSeconds < 1 { throw GatewayConfigurationError("--idle-timeout must be at least 1 second") }
        if shutdownTimeoutSeconds < 0 { throw GatewayConfigurationError("--shutdown-timeout cannot be negative") }
        if adminOnlyOnAdminListener, adminListen.isEmpty {
            throw GatewayConfigurationError("--admin-only-on-admin-listener needs --admin-listen HOST:PORT")
        }
        if adminToken != nil, adminTokenFile != nil {
            throw GatewayConfigurationError("give the admin token once: --admin-token, --admin-token-file or PUSHGATE_ADMIN_TOKEN")
        }
        if let adminToken, adminToken.isEmpty {
            throw GatewayConfigurationError("the admin token is empty (--admin-token or PUSHGATE_ADMIN_TOKEN)")
        }
    }

    /// The admin token, read from its file when given as one. Leading and trailing blanks and
    /// line ends are not part of it (files usually end with a newline).
    func resolvedAdminToken() throws(GatewayConfigurationError) -> String? {
        guard let adminTokenFile else { return adminToken }
        guard let data = FileManager.default.contents(atPath: adminTokenFile) else {
            throw GatewayConfigurationError("--admin-token-file \(adminTokenFile): cannot be read (missing, or not readable by this user)")
        }
        let token = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        if token.isEmpty { throw GatewayConfigurationError("--admin-token-file \(adminTokenFile) is empty") }
        return token
    }

    /// Hosts that serve the operator routes, for the warning about an open admin surface.
    var operatorHosts: [String] {
        (adminOnlyOnAdminListener ? [] : (cleartextListeners + tlsListen).map(\.host)) + adminListen.map(\.host)
    }

    /// Operator routes served off loopback without a token answer no one there: said at start.
    func warnAboutAdminAccess(hasToken: Bool, logger: Logger) {
        let exposed = operatorHosts.filter { !AccessConfiguration.isLoopback($0) }
        guard !hasToken, !exposed.isEmpty else { return }
        logger.warning(
            "no admin token: /metrics, /v1/admin and /admin answer loopback clients only (403 to others, such as a Prometheus on another host); set --admin-token-file FILE, --admin-token or PUSHGATE_ADMIN_TOKEN",
            metadata: ["listeners": "\(exposed.joined(separator: ", "))"]
        )
    }

    /// The admin listeners to bind.
    func adminListenerConfigurations() -> [ListenerConfiguration] {
        adminListen.map { ListenerConfiguration(host: $0.host, port: $0.port) }
    }

    /// The listeners to bind, in order: cleartext, then TLS (one context shared by all of them).
    func listenerConfigurations() throws -> [ListenerConfiguration] {
        var listeners = cleartextListeners.map { ListenerConfiguration(host: $0.host, port: $0.port) }
        if !tlsListen.isEmpty, let tlsCertificateChain, let tlsPrivateKey {
            let context = try TLSContext.server(
                TLSServerConfiguration(
                    certificateChainPath: tlsCertificateChain,
                    privateKeyPath: tlsPrivateKey,
                    clientCAPath: tlsClientCA,
                    requireClientCertificate: tlsRequireClientCertificate
                )
            )
            listeners += tlsListen.map { ListenerConfiguration(host: $0.host, port: $0.port, tls: context) }
        }
        return listeners
    }

    /// Reads `policySources` (if any) into `access` and the scheduler's policy; logs who may
    /// use the gateway.
    mutating func readPolicySources(logger: Logger) throws {
        if let sources = policySources {
            let file = try sources.configurationFile.map { path throws(ConfigurationFileError) in try ConfigurationFile.load(path: path) }
            access = try AccessConfiguration.load(
                file: file,
                filePath: sources.configurationFile,
                flagKeys: sources.providerKeys,
                acceptsClientCertificates: tlsClientCA != nil,
                environment: sources.environment
            )
            logger.info("access", metadata: access.logMetadata)
            if let scheduler = try file?.scheduler?.configuration() { delivery.scheduler = scheduler }
        } else {
            logger.info("access", metadata: access.logMetadata)
        }
    }

    /// Secure by default: what is open to anyone may only listen on loopback addresses.
    func checkExposure() throws(AccessExposureError) {
        try access.checkExposure(listenHosts: (cleartextListeners + tlsListen).map(\.host))
    }

    /// Secrets travel in cleartext on a cleartext listener (device secrets, the registration
    /// secret, provider tokens, the admin token): off loopback only when asked for by name.
    func checkCleartext() throws(GatewayConfigurationError) {
        guard !allowInsecureCleartext else { return }
        let exposed = (cleartextListeners + adminListen).filter { !AccessConfiguration.isLoopback($0.host) }
        guard !exposed.isEmpty else { return }
        let names = exposed.map { "\($0.host):\($0.port)" }.joined(separator: ", ")
        throw GatewayConfigurationError(
            "refusing to serve cleartext on \(names) (not loopback): device secrets, the registration secret, provider tokens and the admin token would cross the network unencrypted. Serve TLS there (--tls-listen with --tls-cert and --tls-key), keep cleartext on loopback behind a proxy that terminates TLS, or pass --allow-insecure-cleartext for a network you trust"
        )
    }

    /// The transport's settings that follow from this configuration.
    var server: HTTPServerConfiguration {
        var server = HTTPServerConfiguration()
        server.http2.idleTimeout = .seconds(Int64(idleTimeoutSeconds))
        server.http2.streamsUntilAuthorized = access.streamsUntilAuthorized
        return server
    }

    /// The admin listeners' settings: no provider gating (no provider is served there).
    var adminServer: HTTPServerConfiguration {
        var server = HTTPServerConfiguration()
        server.http2.idleTimeout = .seconds(Int64(idleTimeoutSeconds))
        return server
    }
}

/// A setting that cannot run, said in the terms `serve` was given it.
public struct GatewayConfigurationError: Error, Equatable, CustomStringConvertible {
    public var description: String

    public init(_ description: String) {
        self.description = description
    }
}
