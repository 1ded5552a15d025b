import Foundation
import Logging
import NIOCore
import NIOPosix
import PushgateDelivery
import PushgateProviderAuth
import PushgateStore
import PushgateTLS
import PushgateTransport

/// Everything a gateway runs with, however it was given: `serve` resolves its settings
/// (`Settings.all`: flags, environment, file) into this, and `Gateway.run` checks it, reads the
/// policy and starts.
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
    /// The SQLite store's directory (created if missing); not used with `databaseURL`.
    public var dataDirectory = "./pushgate-data"
    /// The PostgreSQL database that holds the store instead of SQLite (libpq's URL or
    /// key=value string). A secret: it may hold a password.
    public var databaseURL: String?
    /// With `databaseURL`: PostgreSQL's `statement_timeout` for the store's connection, and,
    /// with a second more, the longest a commit waits for an answer.
    public var databaseStatementTimeoutMilliseconds = 5000
    /// With `databaseURL`: this node's name in its cluster; nil: `HOST:PORT` of its first
    /// listener.
    public var nodeName: String?
    /// With `databaseURL`: where the other nodes reach this one; nil: `http://` and its first
    /// cleartext listener's address.
    public var nodeAddress: String?
    /// Seconds a connection with no open stream is kept.
    public var idleTimeoutSeconds = 300
    /// The longest either idle timeout may be: a year, "never" for any connection. A value
    /// past it (written to mean "never") is refused by name rather than capped without a word
    /// by the connection's timer.
    public static let maxIdleTimeoutSeconds = 365 * 24 * 3600
    /// Seconds an idle connection is kept until a request on it has proven who sent it (a provider
    /// token or certificate, a device secret, the registration or admin token).
    public var unauthenticatedIdleTimeoutSeconds = 15
    /// Seconds a new connection has to finish TLS and show its protocol.
    public var connectionSetupTimeoutSeconds = 10
    /// Seconds a request's head and body have to arrive.
    public var requestTimeoutSeconds = 30
    /// Seconds an HTTP/2 peer may read nothing while answers wait for it.
    public var writeStallTimeoutSeconds = 60
    /// Connections the main listeners hold at once; nil: the open-file limit (raised to its hard
    /// limit at start) less `OpenFileLimit.reserved`.
    public var maxConnections: Int?
    /// Connections one client address (an IPv4 address, an IPv6 /64) may hold at once; 0: no
    /// limit. Loopback clients are not counted.
    public var maxConnectionsPerAddress = 1000
    /// Devices one client address (an IPv4 address, an IPv6 /64) may create per hour; 0: no
    /// limit. Loopback clients are not counted.
    public var deviceCreationsPerAddressPerHour = 1000
    /// Frames that do nothing (an empty DATA frame not ending its stream, a frame refused with a
    /// stream error) one HTTP/2 connection may send at once, and how many more a second.
    /// Idle connections close after their timeout plus up to a quarter more, drawn per
    /// connection (`HTTP2ServerConfiguration.idleTimeoutSpread`), so that many idle connections
    /// opened together (Benchmarks/abuse.sh opens 900) close over seconds rather than in one
    /// millisecond.
    static let idleTimeoutSpread = 0.25
    public var http2FloodBurst = HTTP2ServerConfiguration().floodBurst
    public var http2FloodFramesPerSecond = HTTP2ServerConfiguration().floodFramesPerSecond
    /// Delivery's settings; `queuedNotificationBudgetBytes` defaults to a quarter of the memory
    /// the process may use.
    public var delivery: DeliveryConfiguration = {
        var delivery = DeliveryConfiguration()
        delivery.queuedNotificationBudgetBytes = defaultQueuedNotificationBudget()
        return delivery
    }()
    /// Seconds in-flight requests get to finish on shutdown.
    public var shutdownTimeoutSeconds = 10
    /// Seconds between SIGTERM and GOAWAY, with `/readyz` answering 503 and everything else
    /// served, so that load balancers take the gateway out before its connections go.
    public var drainGraceSeconds = 5
    /// Event-loop threads.
    public var threads = availableCores()
    /// More loops than any machine has cores for: each takes a thread and three descriptors,
    /// and a value past the process's limits made serve trap at start.
    public static let maxThreads = 1024
    /// When a 200 may be sent: after the fsync (the default), or at once with commits every
    /// `commitIntervalMilliseconds` (a crash loses up to an interval of accepted pushes and acks).
    public var durabilityMode = DurabilityMode.fsync
    public var commitIntervalMilliseconds = 1000
    /// How long a commit may wait for more pushes to share its fsync, in microseconds (0: never).
    public var commitLingerMicroseconds = 1000

    /// The store's durability, from the mode and its interval.
    public var durability: Durability {
        switch durabilityMode {
        case .fsync: .fsync
        case .interval: .interval(nanoseconds: UInt64(max(commitIntervalMilliseconds, 0)) * 1_000_000)
        }
    }
    /// swift-log's level name.
    public var logLevel = "info"
    /// How the log lines are written (the executable's handler reads it; the gateway does not).
    public var logFormat = LogFormat.text
    /// Admin listeners (h2c and HTTP/1.1): the operator routes only.
    public var adminListen: [ListenAddress] = []
    /// Serve cleartext (`listen`, `adminListen`) off loopback anyway: for a network the operator
    /// trusts (a private link, a mesh that encrypts). Without it such a listener is refused.
    public var allowInsecureCleartext = false
    /// The admin token. Without one, the operator routes answer loopback peers only.
    public var adminToken: String?
    /// The main listeners serve health and readiness but not the metrics, admin API and
    /// dashboard (which the admin listeners serve).
    public var adminOnlyOnAdminListener = false
    /// Per-topic gauges in the metrics (topics are not a bounded set).
    public var metricsTopicLabels = false
    /// Request body bytes held at once across every connection, main and admin listeners
    /// together, while their requests arrive.
    public var requestBodyBudgetBytes = RequestBodyBudget.defaultLimit
    /// The origin of Web Push endpoints (`https://push.example.com`), for a gateway behind a
    /// proxy; nil: the one each subscription's request came to (the listener's scheme and the
    /// request's authority). VAPID's `aud` is checked against it.
    public var webpushOrigin: String?
    /// The longest Web Push `TTL` kept; a larger one is cut to it (and to
    /// `maxExpirationSeconds`), and the 201's `TTL` says so.
    public var webpushMaxTTLSeconds = 28 * 24 * 3600
    /// Who may use the gateway and the scheduler's policy, as given: `Gateway.run` reads them
    /// into `access` and `delivery` once the TLS files are loaded.
    public var policy = PolicySettings()
    public var access = AccessConfiguration()

    public init() {}

    /// Provider keys (not yet read), the APNs environment, the registration secret and the
    /// scheduler's policy.
    public struct PolicySettings: Sendable {
        public var providerKeys: [ProviderKeyConfiguration] = []
        /// The APNs environment this gateway stands for ("development" or "production"): keys
        /// configured for the other one are refused with `BadEnvironmentKeyIdInToken`.
        public var environment: ProviderEnvironment?
        public var registrationSecret: String?
        public var maxConsecutiveProviderErrors = 100
        public var scheduler = SchedulerSettings()

        public init() {}
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
            throw GatewayConfigurationError(
                "--tls-cert, --tls-key and --tls-client-ca apply to TLS listeners; add --tls-listen HOST:PORT"
            )
        }
        if tlsRequireClientCertificate, tlsClientCA == nil {
            throw GatewayConfigurationError("--tls-require-client-cert needs --tls-client-ca")
        }
        if Logger.Level(rawValue: logLevel) == nil {
            throw GatewayConfigurationError(
                "--log-level must be one of: \(Logger.Level.allCases.map(\.rawValue).joined(separator: ", "))"
            )
        }
        if !(1...Self.maxThreads).contains(threads) {
            throw GatewayConfigurationError("--threads must be between 1 and \(Self.maxThreads)")
        }
        if !(0...100_000).contains(commitLingerMicroseconds) {
            throw GatewayConfigurationError("--commit-linger-us must be between 0 and 100000 (0.1 s)")
        }
        if !(1...60_000).contains(commitIntervalMilliseconds) {
            throw GatewayConfigurationError("--commit-interval-ms must be between 1 and 60000")
        }
        for (flag, seconds) in [
            ("--idle-timeout", idleTimeoutSeconds),
            ("--unauthenticated-idle-timeout", unauthenticatedIdleTimeoutSeconds),
        ]
        where !(1...Self.maxIdleTimeoutSeconds).contains(seconds) {
            throw GatewayConfigurationError(
                "\(flag) must be between 1 and \(Self.maxIdleTimeoutSeconds) seconds (365 days)"
            )
        }
        if shutdownTimeoutSeconds < 0 { throw GatewayConfigurationError("--shutdown-timeout cannot be negative") }
        if adminOnlyOnAdminListener, adminListen.isEmpty {
            throw GatewayConfigurationError("--admin-only-on-admin-listener needs --admin-listen HOST:PORT")
        }
        if let adminToken, adminToken.isEmpty {
            throw GatewayConfigurationError(
                "the admin token is empty (--admin-token, PUSHGATE_ADMIN_TOKEN or adminToken)"
            )
        }
        // Deploy/kubernetes/secret.yaml's values are public: long enough to pass as secrets,
        // they would let anyone create devices or read the admin API.
        for (name, value) in [("the admin token", adminToken), ("the registration secret", policy.registrationSecret)]
        where value?.hasPrefix(Self.placeholderPrefix) == true {
            throw GatewayConfigurationError(
                "\(name) is still the placeholder of Deploy/kubernetes/secret.yaml (\(Self.placeholderPrefix)...); put a long random one there, e.g. from openssl rand -base64 32"
            )
        }
    }

    /// How the placeholders of the shipped Secret begin.
    static let placeholderPrefix = "REPLACE-WITH-"

    /// Everything that can stop the gateway before it binds, in the order a person is told
    /// first: the settings together, the TLS files, the policy (keys, secret, scheduler),
    /// exposure, cleartext off loopback. Returns the listeners to bind; `config check` runs it
    /// too, binding nothing.
    public mutating func prepare(logger: Logger) throws -> [ListenerConfiguration] {
        try validate()
        if let (before, after) = OpenFileLimit.raiseToHardLimit(), after > before {
            logger.info(
                "raised the open-file limit to its hard limit",
                metadata: ["limit.before": "\(before)", "limit.now": "\(after)"]
            )
        }
        let listeners = try listenerConfigurations()
        try readPolicy()
        try checkExposure()
        try checkCleartext()
        logger.info("access", metadata: access.logMetadata)
        return listeners
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
        adminListen.map { ListenerConfiguration(host: $0.host, port: $0.port, name: "adminListen") }
    }

    /// The listeners to bind, in order: cleartext, then TLS (one context shared by all of them).
    func listenerConfigurations() throws -> [ListenerConfiguration] {
        var listeners = cleartextListeners.map { ListenerConfiguration(host: $0.host, port: $0.port, name: "listen") }
        if let context = try tlsContext() {
            let source = TLSContextSource(context)
            listeners += tlsListen.map {
                ListenerConfiguration(host: $0.host, port: $0.port, tls: source, name: "tlsListen")
            }
        }
        return listeners
    }

    /// The TLS listeners' context, read from the certificate, key and CA files; nil without
    /// TLS listeners.
    func tlsContext() throws -> TLSContext? {
        guard !tlsListen.isEmpty, let tlsCertificateChain, let tlsPrivateKey else { return nil }
        return try TLSContext.server(
            TLSServerConfiguration(
                certificateChainPath: tlsCertificateChain,
                privateKeyPath: tlsPrivateKey,
                clientCAPath: tlsClientCA,
                requireClientCertificate: tlsRequireClientCertificate
            )
        )
    }

    /// Reads `policy` into `access` and the scheduler's policy. Who may use the gateway is
    /// logged by the caller once every check has passed: a refused start or reload never ran it.
    mutating func readPolicy() throws {
        access = try AccessConfiguration.load(policy, acceptsClientCertificates: tlsClientCA != nil)
        delivery.scheduler = try policy.scheduler.configuration()
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

    /// The transport's settings that follow from this configuration; `budget` is shared with
    /// the admin listeners.
    func server(budget: RequestBodyBudget) -> HTTPServerConfiguration {
        var server = adminServer(budget: budget)
        server.http2.streamsUntilAuthorized = access.streamsUntilAuthorized
        server.connectionLimits = ConnectionLimits(
            maxConnections: maxConnections ?? OpenFileLimit.current().map(OpenFileLimit.connectionsAllowed(limit:)),
            maxPerAddress: maxConnectionsPerAddress > 0 ? maxConnectionsPerAddress : nil
        )
        return server
    }

    /// The admin listeners' settings: no provider gating (no provider is served there), and no
    /// connection limits, so that operators still reach a gateway whose listeners are full.
    func adminServer(budget: RequestBodyBudget) -> HTTPServerConfiguration {
        var server = HTTPServerConfiguration()
        server.http2.idleTimeout = .seconds(Int64(idleTimeoutSeconds))
        server.http2.unauthenticatedIdleTimeout = .seconds(Int64(unauthenticatedIdleTimeoutSeconds))
        server.http2.idleTimeoutSpread = Self.idleTimeoutSpread
        server.http2.requestTimeout = .seconds(Int64(requestTimeoutSeconds))
        server.http2.writeStallTimeout = .seconds(Int64(writeStallTimeoutSeconds))
        server.connectionSetupTimeout = .seconds(Int64(connectionSetupTimeoutSeconds))
        server.http2.floodBurst = http2FloodBurst
        server.http2.floodFramesPerSecond = http2FloodFramesPerSecond
        server.requestBodyBudget = budget
        return server
    }
}

/// When the gateway answers a push or an ack (README, "Durability mode").
public enum DurabilityMode: String, Sendable, CaseIterable {
    /// After the change is committed and fsync'd: nothing answered is lost.
    case fsync
    /// Once accepted in memory; commits at an interval, whose length is what a crash can lose.
    case interval
}
