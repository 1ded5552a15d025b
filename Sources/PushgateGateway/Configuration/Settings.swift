import Logging
import NIOCore
import PushgateDelivery
import PushgateHTTP
import PushgateModel
import PushgateProviderAuth
import PushgateScheduler
import PushgateTransport

/// Every `serve` setting, once. `serve` and `config check` parse flags, the environment and the
/// file from this table; `config check` prints it; the README's Configuration section is
/// generated from it (`markdownReference`, which a test compares with the README).
public enum Settings {
    public static let all: [Setting] =
        [
            Setting(
                "config",
                .path,
                "FILE",
                default: "none",
                sources: [.flag, .environment],
                help: "The JSON configuration file: a key for every setting of this table but this one."
            ) { _, _ throws(SettingError) in },
            Setting(
                "listen",
                .list,
                "HOST:PORT",
                default: "127.0.0.1:2197 when no listener is given",
                help:
                    "Cleartext listener: HTTP/2 with prior knowledge and HTTP/1.1, told apart by the first bytes. IPv6 as [::1]:2197."
            ) { configuration, value throws(SettingError) in configuration.listen = try value.listenAddresses() },
            Setting(
                "tlsListen",
                .list,
                "HOST:PORT",
                default: "none",
                help: "TLS listener (TLS 1.2+, ALPN h2 and http/1.1); needs tlsCert and tlsKey."
            ) { configuration, value throws(SettingError) in configuration.tlsListen = try value.listenAddresses() },
            Setting(
                "tlsCert",
                .path,
                "FILE",
                default: "none",
                reloads: true,
                help: "PEM certificate chain of the TLS listeners, leaf first."
            ) {
                configuration,
                value throws(SettingError) in configuration.tlsCertificateChain = try value.path()
            },
            Setting(
                "tlsKey",
                .path,
                "FILE",
                default: "none",
                reloads: true,
                help: "PEM private key of the TLS listeners."
            ) {
                configuration,
                value throws(SettingError) in configuration.tlsPrivateKey = try value.path()
            },
            Setting(
                "tlsClientCA",
                .path,
                "FILE",
                default: "none",
                help:
                    "Verify client certificates on TLS listeners against this CA; a client without one is still served (it may authenticate with a token)."
            ) { configuration, value throws(SettingError) in configuration.tlsClientCA = try value.path() },
            Setting(
                "tlsRequireClientCert",
                .toggle,
                default: "off",
                help: "Refuse TLS clients without a valid certificate (needs tlsClientCA)."
            ) {
                configuration,
                value throws(SettingError) in configuration.tlsRequireClientCertificate = try value.toggle()
            },
            Setting(
                "allowInsecureCleartext",
                .toggle,
                default: "off",
                help:
                    "Serve listen and adminListen off loopback in cleartext anyway (refused otherwise: secrets would cross the network unencrypted); for a network you trust."
            ) { configuration, value throws(SettingError) in configuration.allowInsecureCleartext = try value.toggle()
            },
            Setting(
                "dataDir",
                .path,
                "DIR",
                default: "./pushgate-data",
                help: "The SQLite store's directory (created if missing; one gateway per directory)."
            ) {
                configuration,
                value throws(SettingError) in configuration.dataDirectory = try value.path()
            },
            Setting(
                "databaseURL",
                .text,
                "URL",
                default: "none",
                secret: true,
                help:
                    "Keep every record in this PostgreSQL database instead of SQLite in dataDir (which is then not used): libpq's URL (postgresql://USER:PASSWORD@HOST:PORT/DB, with ?sslmode=verify-full for TLS, or postgresql:///DB?host=/run/postgresql) or key=value string, with PG* variables and ~/.pgpass as for psql. Gateways given one database form a cluster. Prefer the file forms: it may hold a password."
            ) { configuration, value throws(SettingError) in configuration.databaseURL = try value.databaseURL() },
            Setting(
                "databaseStatementTimeoutMs",
                .integer,
                "MS",
                default: "5000",
                help:
                    "With databaseURL: the longest a statement may run (PostgreSQL's statement_timeout), and, a second more, the longest a commit waits for the database's answer; then the requests in it get 503 and the connection is made again."
            ) { configuration, value throws(SettingError) in
                configuration.databaseStatementTimeoutMilliseconds = try value.integer(in: 100...600_000)
            },
            Setting(
                "nodeName",
                .text,
                "NAME",
                default: "HOST:PORT of the first listener",
                help:
                    "With databaseURL, where gateways sharing the database form a cluster: this node's name in logs, metrics and the admin API (GET /v1/admin/nodes)."
            ) { configuration, value throws(SettingError) in configuration.nodeName = try value.text() },
            Setting(
                "nodeAddress",
                .text,
                "URL",
                default: "http:// and the first cleartext listener",
                help:
                    "With databaseURL: where the other nodes reach this one (http://HOST:PORT, a cleartext listener), to hand it the requests for the devices it holds. Give it when the first cleartext listener's address does not reach this machine from the others (0.0.0.0, a container's address). Without it and without a cleartext listener, the gateway adds one on 127.0.0.1 at a free port: enough for nodes on one host. Node-to-node traffic is not encrypted: keep that listener on a private network."
            ) { configuration, value throws(SettingError) in
                let address = try value.text()
                guard address.hasPrefix("http://"), !address.dropFirst("http://".count).contains("/") else {
                    throw value.problem("\"\(address)\" is not http://HOST:PORT")
                }
                configuration.nodeAddress = address
            },
            Setting(
                "idleTimeout",
                .integer,
                "SECONDS",
                default: "300",
                help:
                    "A connection with no open stream is sent GOAWAY and closed after this long (at most 31536000, a year)."
            ) {
                configuration,
                value throws(SettingError) in
                configuration.idleTimeoutSeconds = try value.integer(in: 1...GatewayConfiguration.maxIdleTimeoutSeconds)
            },
            Setting(
                "unauthenticatedIdleTimeout",
                .integer,
                "SECONDS",
                default: "15",
                help:
                    "Replaces idleTimeout until a request on the connection has proven who sent it (a provider token or certificate, a device secret, the registration secret, the admin token or a loopback operator): an idle connection that has proven nothing is closed after this long (at most idleTimeout)."
            ) { configuration, value throws(SettingError) in
                configuration.unauthenticatedIdleTimeoutSeconds = try value.integer(
                    in: 1...GatewayConfiguration.maxIdleTimeoutSeconds
                )
            },
            Setting(
                "connectionSetupTimeout",
                .integer,
                "SECONDS",
                default: "10",
                help:
                    "A new connection that has not finished its TLS handshake and shown its protocol (the HTTP/2 preface or an HTTP/1.1 request line) within this long is closed (counted in pushgate_timeouts_total{timeout=\"connection_setup\"})."
            ) { configuration, value throws(SettingError) in
                configuration.connectionSetupTimeoutSeconds = try value.integer(in: 1...3600)
            },
            Setting(
                "requestTimeout",
                .integer,
                "SECONDS",
                default: "30",
                help:
                    "A request whose head and body have not all arrived within this long of its start is dropped: its HTTP/2 stream reset (CANCEL), its HTTP/1.1 connection closed (counted in pushgate_timeouts_total{timeout=\"request\"}). Event streams are responses and are not limited."
            ) { configuration, value throws(SettingError) in
                configuration.requestTimeoutSeconds = try value.integer(in: 1...3600)
            },
            Setting(
                "writeStallTimeout",
                .integer,
                "SECONDS",
                default: "60",
                help:
                    "An HTTP/2 connection whose socket stays unwritable for this long (its peer reads nothing while bytes wait to be sent) is closed (counted in pushgate_timeouts_total{timeout=\"stalled_reader\"}); its unacked pushes are delivered again on its next stream. A peer that stops reading while its flow-control window holds what was sent leaves the socket writable and is not cut: its pushes wait, within the device limits, for its next stream."
            ) { configuration, value throws(SettingError) in
                configuration.writeStallTimeoutSeconds = try value.integer(in: 1...3600)
            },
            Setting(
                "heartbeatInterval",
                .integer,
                "SECONDS",
                default: "\(DeliveryConfiguration().heartbeatIntervalMillis / 1000)",
                help:
                    "The longest a device's event stream stays silent: one that has sent nothing for this long (less a second) gets a heartbeat comment, and the stream's response says the figure in pushgate-heartbeat-interval so that agents can take a silence of about twice as long as a dead connection. Keep it under the idle timeout of any proxy between devices and the gateway; each heartbeat is a write, which is most of what an idle device costs (Benchmarks/idle.sh)."
            ) { configuration, value throws(SettingError) in
                configuration.delivery.heartbeatIntervalMillis = Int64(try value.integer(in: 2...3600)) * 1000
            },
            Setting(
                "maxConnections",
                .integer,
                "N",
                default: "the open-file limit less \(OpenFileLimit.reserved)",
                help:
                    "Connections the listen and tlsListen listeners hold at once; one more is closed as soon as it is accepted (counted in pushgate_connections_refused_total). At start the soft open-file limit is raised to the hard limit; the default leaves \(OpenFileLimit.reserved) descriptors for the store and the rest. Admin listeners are not limited."
            ) { configuration, value throws(SettingError) in
                configuration.maxConnections = try value.integer(in: 1...Int.max)
            },
            Setting(
                "maxConnectionsPerAddress",
                .integer,
                "N",
                default: "1000",
                help:
                    "Connections one client address holds at once (an IPv4 address, or an IPv6 /64); one more is closed as soon as it is accepted (counted). Loopback clients are not counted. Behind carrier-grade NAT or a proxy that does not keep client addresses many devices share an address: raise it, or 0 for no limit."
            ) { configuration, value throws(SettingError) in
                configuration.maxConnectionsPerAddress = try value.integer(in: 0...Int.max)
            },
            Setting(
                "http2FloodBurst",
                .integer,
                "FRAMES",
                default: "\(HTTP2ServerConfiguration().floodBurst)",
                help:
                    "Frames that make the gateway work for nothing (an empty DATA frame that does not end its stream, a stream refused for a protocol error) one HTTP/2 connection may send at once; past them and http2FloodFramesPerSecond the connection ends with GOAWAY ENHANCE_YOUR_CALM (counted in pushgate_http2_flood_closures_total). Well-behaved clients send none."
            ) { configuration, value throws(SettingError) in
                configuration.http2FloodBurst = try value.integer(in: 1...HTTP2FrameFloodLimit.maxBurst)
            },
            Setting(
                "http2FloodFramesPerSecond",
                .integer,
                "FRAMES",
                default: "\(HTTP2ServerConfiguration().floodFramesPerSecond)",
                help:
                    "How many more frames that do nothing an HTTP/2 connection may send each second once http2FloodBurst is spent."
            ) { configuration, value throws(SettingError) in
                configuration.http2FloodFramesPerSecond = try value.integer(in: 1...HTTP2FrameFloodLimit.maxPerSecond)
            },
            Setting(
                "shutdownTimeout",
                .integer,
                "SECONDS",
                default: "10",
                help: "On SIGTERM or SIGINT: the time in-flight requests get before connections are closed."
            ) {
                configuration,
                value throws(SettingError) in configuration.shutdownTimeoutSeconds = try value.integer(in: 0...Int.max)
            },
            Setting(
                "drainGraceSeconds",
                .integer,
                "SECONDS",
                default: "5",
                help:
                    "On SIGTERM or SIGINT: /readyz answers 503 at once while everything is still served for this long, so that load balancers stop sending traffic; then connections get GOAWAY and event streams end (0: at once)."
            ) { configuration, value throws(SettingError) in
                configuration.drainGraceSeconds = try value.integer(in: 0...3600)
            },
            Setting(
                "requestBodyBudgetBytes",
                .integer,
                "BYTES",
                default: "\(RequestBodyBudget.defaultLimit) (\(RequestBodyBudget.defaultLimit >> 20) MiB)",
                help:
                    "Request body bytes held at once, all connections together, while their requests arrive. A body that does not fit is refused: over HTTP/2 with RST_STREAM REFUSED_STREAM (not processed; clients retry it), over HTTP/1.1 with 503 and retry-after. Connections that have proven nothing (no valid token, certificate, secret) hold a quarter of it at most. At least \(Router.defaultMaxBodySize), the body a device or operator request may have."
            ) { configuration, value throws(SettingError) in
                configuration.requestBodyBudgetBytes = try value.integer(in: Router.defaultMaxBodySize...Int.max)
            },
            Setting(
                "threads",
                .integer,
                "N",
                default: "one per core it may run on",
                help:
                    "Event-loop threads (the default counts the cores of the process's CPU affinity and cgroup; at most 1024)."
            ) {
                configuration,
                value throws(SettingError) in
                configuration.threads = try value.integer(in: 1...GatewayConfiguration.maxThreads)
            },
            Setting(
                "durability",
                .text,
                "MODE",
                default: "fsync",
                help:
                    "fsync: a push or ack is answered once committed and fsync'd (nothing answered is lost). interval: answered once accepted in memory, committed every commitIntervalMs; a crash or power loss loses what was accepted since the last commit."
            ) { configuration, value throws(SettingError) in
                configuration.durabilityMode = try value.choice(DurabilityMode.self)
            },
            Setting(
                "commitIntervalMs",
                .integer,
                "MS",
                default: "1000",
                help: "With durability interval: milliseconds between commits, the most a crash can lose."
            ) {
                configuration,
                value throws(SettingError) in
                configuration.commitIntervalMilliseconds = try value.integer(in: 1...60_000)
            },
            Setting(
                "commitLingerUs",
                .integer,
                "US",
                default: "1000",
                help:
                    "Microseconds a commit may wait for more pushes to share its fsync, when the arrival rate says they will come (0: never wait)."
            ) { configuration, value throws(SettingError) in
                configuration.commitLingerMicroseconds = try value.integer(in: 0...100_000)
            },
            Setting(
                "logLevel",
                .text,
                "LEVEL",
                default: "info",
                help: "trace, debug, info, notice, warning, error or critical; logs go to stderr."
            ) {
                configuration,
                value throws(SettingError) in configuration.logLevel = try value.choice(Logger.Level.self).rawValue
            },
            Setting(
                "logFormat",
                .text,
                "FORMAT",
                default: "text",
                help: "text (one line per event, for people) or json (one object per line, for log collectors)."
            ) {
                configuration,
                value throws(SettingError) in configuration.logFormat = try value.choice(LogFormat.self)
            },
            Setting(
                "adminListen",
                .list,
                "HOST:PORT",
                default: "none",
                help: "Admin listener (h2c and HTTP/1.1): /metrics, /v1/admin, /admin, /healthz and /readyz only."
            ) { configuration, value throws(SettingError) in configuration.adminListen = try value.listenAddresses() },
            Setting(
                "adminToken",
                .text,
                "TOKEN",
                default: "none",
                secret: true,
                help:
                    "Bearer token for /metrics and /v1/admin. Without one they answer loopback clients only. Prefer the file forms: a flag's value is visible in the process list. 1 to 1024 visible ASCII characters (it travels in `authorization: bearer TOKEN`): a file with a line break inside, a space or a control character is refused (surrounding blanks and the final newline are not part of it)."
            ) { configuration, value throws(SettingError) in configuration.adminToken = try value.adminToken() },
            Setting(
                "adminOnlyOnAdminListener",
                .toggle,
                default: "off",
                help:
                    "Serve /metrics, /v1/admin and /admin on the admin listeners only (the main listeners keep /healthz and /readyz)."
            ) { configuration, value throws(SettingError) in configuration.adminOnlyOnAdminListener = try value.toggle()
            },
            Setting(
                "metricsTopicLabels",
                .toggle,
                default: "off",
                help:
                    "Per-topic gauges in /metrics (registrations; held, stored, unacked) for the 100 topics holding most."
            ) { configuration, value throws(SettingError) in configuration.metricsTopicLabels = try value.toggle() },
            Setting(
                "providerKeys",
                .list,
                "TEAM:KEYID:FILE:TOPIC[,TOPIC]",
                default: "none",
                accumulates: true,
                reloads: true,
                flag: "--provider-key",
                help:
                    "Provider token keys. Flag and environment: TEAM:KEYID:FILE:TOPIC[,TOPIC] (FILE: the .p8, or a PEM public key). File: objects (teamId, keyId, privateKeyFile, publicKeyFile or publicKey, topics, environment). Flags, environment and file add up."
            ) { configuration, value throws(SettingError) in
                configuration.policy.providerKeys += try value.providerKeys()
            },
            Setting(
                "environment",
                .text,
                "NAME",
                default: "none",
                reloads: true,
                help:
                    "The APNs environment this gateway stands for, development or production: keys configured for the other one are refused."
            ) { configuration, value throws(SettingError) in
                configuration.policy.environment = try value.choice(ProviderEnvironment.self)
            },
            Setting(
                "registrationSecret",
                .text,
                "SECRET",
                default: "none",
                secret: true,
                help:
                    "Needed (authorization: bearer SECRET) to create devices; at least 16 characters. Without one, device creation is open (loopback only)."
            ) { configuration, value throws(SettingError) in configuration.policy.registrationSecret = try value.text()
            },
            Setting(
                "maxConsecutiveProviderErrors",
                .integer,
                "N",
                default: "100",
                help: "A provider connection is closed after this many refused requests in a row."
            ) { configuration, value throws(SettingError) in
                configuration.policy.maxConsecutiveProviderErrors = try value.integer(in: 1...Int.max)
            },
            Setting(
                "maxQueuedPerDevice",
                .integer,
                "N",
                default: "10000",
                help:
                    "Notifications waiting for one device (stored, unacknowledged and held, all apps); beyond, pushes to it get 429 TooManyRequests."
            ) { configuration, value throws(SettingError) in
                configuration.delivery.maxQueuedPerDevice = try value.integer(in: 1...1_000_000)
            },
            Setting(
                "maxQueuedPerApp",
                .integer,
                "N",
                default: "5000",
                help:
                    "Notifications stored or unacknowledged for one app on a device; beyond, that app's pushes to it get 429 TooManyRequests and other apps' still go."
            ) { configuration, value throws(SettingError) in
                configuration.delivery.maxQueuedPerApp = try value.integer(in: 1...1_000_000)
            },
            Setting(
                "queuedNotificationBudgetBytes",
                .integer,
                "BYTES",
                default: "a quarter of the memory the process may use (its cgroup's memory.max, else the machine's)",
                help:
                    "Memory all notifications waiting for their devices (stored, unacknowledged, held) may take, all devices together: payload plus \(QueuedNotificationBudget.overheadBytes) bytes each. Past it pushes are refused with 429 TooManyRequests until acks, expiry or drops make room; what is already accepted is never dropped for it. At least 1048576."
            ) { configuration, value throws(SettingError) in
                configuration.delivery.queuedNotificationBudgetBytes = try value.integer(in: (1 << 20)...Int.max)
            },
            Setting(
                "deviceCreationsPerAddressPerHour",
                .integer,
                "N",
                default: "1000",
                help:
                    "Devices one client address (an IPv4 address, or an IPv6 /64) may create per hour: that many at once, then one every 3600/N seconds; past it POST /v1/devices answers 429 TooManyRequests with retry-after. Checked after the registration secret, which apps ship. Loopback clients are not counted. 0: no limit."
            ) { configuration, value throws(SettingError) in
                configuration.deviceCreationsPerAddressPerHour = try value.integer(in: 0...1_000_000)
            },
            Setting(
                "maxRegistrationsPerDevice",
                .integer,
                "N",
                default: "256",
                help:
                    "Active registrations (apps) on one device; beyond, a registration gets 409 TooManyRegistrations until one is unregistered."
            ) { configuration, value throws(SettingError) in
                configuration.delivery.maxRegistrationsPerDevice = try value.integer(in: 1...100_000)
            },
            Setting(
                "unregisteredRetentionSeconds",
                .integer,
                "SECONDS",
                default: "2592000",
                help:
                    "How long an unregistered token answers 410 Unregistered (30 days by default); then it is forgotten and answers 400 BadDeviceToken."
            ) { configuration, value throws(SettingError) in
                configuration.delivery.unregisteredRetentionMillis =
                    Int64(try value.integer(in: 1...(3660 * 24 * 3600))) * 1000
            },
            Setting(
                "maxExpirationSeconds",
                .integer,
                "SECONDS",
                default: "2592000",
                help:
                    "The latest apns-expiration honoured, counted from acceptance (30 days by default); a later one is cut to it."
            ) { configuration, value throws(SettingError) in
                configuration.delivery.maxExpirationMillis = Int64(try value.integer(in: 1...(366 * 24 * 3600))) * 1000
            },
            Setting(
                "webpushOrigin",
                .text,
                "URL",
                default: "the origin each subscription's request came to",
                help:
                    "The origin of Web Push endpoints, https://HOST[:PORT] (or http://), for a gateway behind a proxy or load balancer: subscriptions' endpoints are under it, and VAPID's aud must be it. Without it, an endpoint is under the origin its subscription's request came to (the listener's scheme and the request's Host or :authority)."
            ) { configuration, value throws(SettingError) in
                let origin = try value.text()
                if let problem = WebPushEndpoint.problem(withConfigured: origin) {
                    throw value.problem("\"\(origin)\" \(problem)")
                }
                configuration.webpushOrigin = origin
            },
            Setting(
                "webpushMaxTTLSeconds",
                .integer,
                "SECONDS",
                default: "2419200",
                help:
                    "The longest Web Push TTL kept (28 days by default; at most maxExpirationSeconds applies too); a larger one is cut to it, and the 201's TTL header says what was kept."
            ) { configuration, value throws(SettingError) in
                configuration.webpushMaxTTLSeconds = try value.integer(in: 0...(366 * 24 * 3600))
            },
        ] + schedulerSettings

    /// The scheduler's global policy; its range checks are the policy's own, made when the
    /// gateway reads it (SchedulerSettings.configuration()), at start and at each reload.
    private static let schedulerSettings: [Setting] = {
        let policy = SchedulerPolicy()
        func integer(
            _ field: String,
            _ placeholder: String,
            _ defaultValue: some BinaryInteger,
            _ help: String,
            _ target: any WritableKeyPath<SchedulerSettings, Int?> & Sendable
        ) -> Setting {
            Setting("scheduler." + field, .integer, placeholder, default: "\(defaultValue)", reloads: true, help: help)
            { configuration, value throws(SettingError) in
                configuration.policy.scheduler[keyPath: target] = try value.integer()
            }
        }
        func seconds(
            _ field: String,
            _ millis: Int64,
            _ help: String,
            _ target: any WritableKeyPath<SchedulerSettings, Int64?> & Sendable
        ) -> Setting {
            Setting("scheduler." + field, .integer, "SECONDS", default: "\(millis / 1000)", reloads: true, help: help) {
                configuration,
                value throws(SettingError) in
                configuration.policy.scheduler[keyPath: target] = Int64(try value.integer())
            }
        }
        return [
            integer(
                "appBurst",
                "N",
                policy.appBurst,
                "Silent pushes an app may receive at once (its bucket's size).",
                \.appBurst
            ),
            integer(
                "appRefillPerHour",
                "N",
                policy.appRefillPerHour,
                "Silent pushes an app's bucket regains per hour.",
                \.appRefillPerHour
            ),
            integer(
                "deviceBurst",
                "N",
                policy.deviceBurst,
                "Silent pushes a device may receive at once, all apps together.",
                \.deviceBurst
            ),
            integer(
                "deviceRefillPerHour",
                "N",
                policy.deviceRefillPerHour,
                "Silent pushes a device's bucket regains per hour.",
                \.deviceRefillPerHour
            ),
            integer(
                "maxHeldPerApp",
                "N",
                policy.maxHeldPerApp,
                "Held silent pushes kept per app; the oldest is dropped beyond.",
                \.maxHeldPerApp
            ),
            seconds(
                "maxDeferralSeconds",
                policy.maxDeferralMillis,
                "The longest a regular (not silent) priority-5 push is held: silent pushes wait for their budget or a wake event.",
                \.maxDeferralSeconds
            ),
            seconds(
                "defaultExpirationSeconds",
                policy.defaultExpirationMillis,
                "How long a push without apns-expiration is kept.",
                \.defaultExpirationSeconds
            ),
            seconds(
                "fetchWindowSeconds",
                policy.fetchWindowMillis,
                "How long an app woken by a silent push has to report its fetch.",
                \.fetchWindowSeconds
            ),
            seconds(
                "timeoutPenaltySeconds",
                policy.timeoutPenaltyMillis,
                "How long an app whose fetch timed out gets a halved refill.",
                \.timeoutPenaltySeconds
            ),
            integer(
                "minRefillPerHour",
                "N",
                policy.minRefillPerHour,
                "The floor of an app's refill however its fetches go.",
                \.minRefillPerHour
            ),
            Setting(
                "scheduler.topics",
                .structured,
                default: "none",
                reloads: true,
                help:
                    "Per-topic overrides: {\"TOPIC\": {FIELD: VALUE}}, any scheduler field but deviceBurst and deviceRefillPerHour."
            ) { configuration, value throws(SettingError) in
                configuration.policy.scheduler.topics = try value.topicOverrides()
            },
        ]
    }()

    /// The setting whose flag (or secret-file flag) is `flag`.
    static func setting(flag: String) -> (setting: Setting, isSecretFile: Bool)? {
        if let setting = all.first(where: { $0.flag == flag }) { return (setting, false) }
        if let setting = all.first(where: { $0.secretFileFlag == flag }) { return (setting, true) }
        return nil
    }
}

/// How `serve` writes its log lines (stderr).
public enum LogFormat: String, Sendable, CaseIterable {
    /// swift-log's own lines, for people.
    case text
    /// One JSON object per line, for log collectors.
    case json
}
