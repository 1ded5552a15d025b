import Logging
import NIOCore
import NIOPosix
import PushgateCluster
import PushgateClusterNode
import PushgateDelivery
import PushgateDeviceAPI
import PushgateHTTP
import PushgateModel
import PushgateOperator
import PushgateProviderAPI
import PushgateProviderAuth
import PushgateStore
import PushgateStorePostgres
import PushgateStoreSQLite
import PushgateTransport
import PushgateWebPush
import ServiceLifecycle

/// The composition root: builds the store, the delivery core, the routes and the listeners from a
/// `GatewayConfiguration`, and runs them as one service.
public enum Gateway {
    /// Runs the gateway until SIGTERM or SIGINT, then drains and returns. `onStarted` gets the
    /// bound addresses, port 0 resolved: the main listeners in order (cleartext, then TLS),
    /// then the admin listeners.
    /// `reread` resolves the settings again from their sources, for reloads (SIGHUP,
    /// `POST /v1/admin/reload`); without it a reload reads the same files again.
    /// Throws `GatewayConfigurationError` for settings that cannot run, before anything is
    /// opened or bound; other errors come from the machine (the store, a port).
    public static func run(
        _ configuration: GatewayConfiguration,
        logger: Logger,
        reread: (@Sendable () throws -> GatewayConfiguration)? = nil,
        onStarted: @escaping @Sendable (StartedListeners) -> Void = { _ in }
    ) async throws {
        let given = configuration
        var configuration = configuration
        let listeners: [ListenerConfiguration]
        do {
            listeners = try configuration.prepare(logger: logger)
        } catch let error as GatewayConfigurationError {
            throw error
        } catch {
            // A TLS file, a provider key or the exposure check: settings that cannot run, like
            // the rest, so that `serve` exits with the one code supervisors do not restart on.
            throw GatewayConfigurationError("\(error)")
        }
        configuration.warnAboutAdminAccess(hasToken: configuration.adminToken != nil, logger: logger)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: configuration.threads)
        let metrics = GatewayMetrics(version: PushgateVersion.current)
        let store: any NotificationStore
        let cluster: PostgresCluster?
        do {
            (store, cluster) = try openStore(configuration, metrics: metrics, logger: logger)
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
        let gateway: AssembledGateway
        do {
            gateway = try assemble(
                configuration,
                listeners: listeners,
                store: store,
                cluster: cluster,
                group: group,
                metrics: metrics,
                reread: reread ?? { given },
                logger: logger
            )
        } catch {
            await store.close()
            try? await group.shutdownGracefully()
            throw error
        }
        let tlsFlags = listeners.map { $0.tls != nil }
        let service = GatewayService(
            gateway: gateway,
            store: store,
            shutdownDeadline: .seconds(Int64(configuration.shutdownTimeoutSeconds)),
            drainGrace: .seconds(configuration.drainGraceSeconds),
            logger: logger
        ) { addresses in
            onStarted(
                StartedListeners(
                    main: Array(zip(addresses.main, tlsFlags).map { (address: $0, isTLS: $1) }),
                    admin: addresses.admin
                )
            )
        }
        let services = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: [.init(service: service)],
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

    /// The store the configuration names: PostgreSQL with `databaseURL` (and nothing in
    /// `dataDirectory`, which is then not even created), with the cluster's side of it (every
    /// gateway on a database is a node of its cluster, alone or not); SQLite in `dataDirectory`
    /// otherwise.
    static func openStore(
        _ configuration: GatewayConfiguration,
        metrics: GatewayMetrics,
        logger: Logger
    ) throws(StoreError) -> (any NotificationStore, PostgresCluster?) {
        let pacing = CommitPacing(
            lingerNanos: UInt64(configuration.commitLingerMicroseconds) * 1000,
            deferNanos: CommitPacing.default.deferNanos
        )
        let store: any NotificationStore
        var cluster: PostgresCluster?
        if let url = configuration.databaseURL {
            var options = PostgresOptions()
            options.statementTimeoutMilliseconds = configuration.databaseStatementTimeoutMilliseconds
            options.requireSynchronousCommit = configuration.durability == .fsync
            options.cluster = true
            let postgres = try PostgresStore(
                url: url,
                options: options,
                pacing: pacing,
                durability: configuration.durability,
                metrics: metrics.store,
                logger: logger
            )
            metrics.watch(database: postgres.backend.connectionStatus)
            if SQLiteBackend.holdsStore(directory: configuration.dataDirectory) {
                logger.warning(
                    "the data directory holds a SQLite store, which is not used with --database-url: its devices and pushes are not in PostgreSQL unless copied there (pushgate store copy)",
                    metadata: ["dataDir": "\(configuration.dataDirectory)"]
                )
            }
            store = postgres
            cluster = PostgresCluster(
                url: url,
                options: options,
                leaseMillis: NodeLease.Configuration().leaseMillis,
                logger: logger
            )
        } else {
            store = try SQLiteStore(
                directory: configuration.dataDirectory,
                pacing: pacing,
                durability: configuration.durability,
                metrics: metrics.store,
                logger: logger
            )
        }
        if case .interval(let nanoseconds) = configuration.durability {
            logger.notice(
                "durability: interval; a crash loses what was accepted in the last \(nanoseconds / 1_000_000) ms"
            )
        }
        return (store, cluster)
    }

    /// What `run` bound.
    public struct StartedListeners: Sendable {
        public var main: [(address: SocketAddress, isTLS: Bool)]
        public var admin: [SocketAddress]
    }

    /// Builds the delivery core (not yet restored), the routes and the servers on `listeners`
    /// and the configuration's admin listeners. `metrics` must be the one the store records
    /// into, if it records.
    public static func assemble(
        _ configuration: GatewayConfiguration,
        listeners: [ListenerConfiguration],
        store: any NotificationStore,
        cluster clusterStore: (any ClusterStore)? = nil,
        group: any EventLoopGroup,
        clock: any DeliveryClock = SystemClock(),
        metrics: GatewayMetrics = GatewayMetrics(version: PushgateVersion.current),
        reread: (@Sendable () throws -> GatewayConfiguration)? = nil,
        logger: Logger
    ) throws -> AssembledGateway {
        let events = EventHub()
        let core = try DeliveryCore(
            group: group,
            store: store,
            clock: clock,
            configuration: configuration.delivery,
            metrics: metrics.delivery,
            observer: events,
            logger: logger
        )
        let cluster = try clusterStore.map { store in
            ClusterNode(
                name: configuration.nodeName,
                address: configuration.nodeAddress,
                store: store,
                core: core,
                secret: try store.clusterSecret(),
                group: group,
                logger: logger
            )
        }
        let readiness = Readiness(store: store.health, cluster: cluster)
        let acceptor: any PushAcceptor = cluster ?? core
        let provider = ProviderCounters()
        metrics.follow(delivery: core.counters, provider: provider)
        metrics.watch(store.health)
        if let cluster { metrics.watch(cluster: cluster) }
        var settings = AdminConsole.Settings(access: AdminAccess(token: configuration.adminToken))
        settings.metricsTopicLabels = configuration.metricsTopicLabels
        let console = AdminConsole(
            settings: settings,
            metrics: metrics,
            events: events,
            core: core,
            provider: provider,
            store: store,
            cluster: cluster,
            clock: clock,
            group: group,
            logger: logger
        )

        let providers = ProviderAuthenticatorSource(configuration.access.providers)
        let reloader = ConfigurationReloader(
            running: configuration,
            reread: reread ?? { [configuration] in configuration },
            tls: listeners.lazy.compactMap(\.tls).first,
            providers: providers,
            core: core,
            metrics: metrics,
            logger: logger
        )

        var operatorRoutes = Router()
        HealthRoutes.register(on: &operatorRoutes, readiness: readiness)
        console.register(on: &operatorRoutes)
        ReloadRoute.register(on: &operatorRoutes, reloader: reloader, console: console)

        var mainRoutes = configuration.adminOnlyOnAdminListener ? Router() : operatorRoutes
        if configuration.adminOnlyOnAdminListener { HealthRoutes.register(on: &mainRoutes, readiness: readiness) }
        let gate = ProviderGate(
            providers: providers,
            isDraining: { readiness.isDraining },
            maxConsecutiveErrors: configuration.access.maxConsecutiveProviderErrors,
            nowMillis: { clock.nowMillis() },
            counters: provider
        )
        ProviderRoute.register(
            on: &mainRoutes,
            acceptor: acceptor,
            validator: ProviderRequestValidator(),
            gate: gate,
            logger: logger
        )
        let creationLimit =
            configuration.deviceCreationsPerAddressPerHour > 0
            ? DeviceCreationGate(
                perHour: configuration.deviceCreationsPerAddressPerHour,
                nowMillis: { clock.nowMillis() }
            )
            : nil
        if let creationLimit { metrics.watchDeviceCreationRefusals { creationLimit.refusals } }
        DeviceRoutes.register(
            on: &mainRoutes,
            core: core,
            registrationSecret: configuration.access.registrationSecret,
            creationLimit: creationLimit,
            webPushOrigin: configuration.webpushOrigin,
            placement: cluster
        )
        cluster?.registerRoutes(on: &mainRoutes, deviceView: console.localDeviceResponse)
        WebPushRoute.register(
            on: &mainRoutes,
            acceptor: acceptor,
            validator: WebPushRequestValidator(
                maxTTLSeconds: min(
                    Int64(configuration.webpushMaxTTLSeconds),
                    configuration.delivery.maxExpirationMillis / 1000
                )
            ),
            origin: configuration.webpushOrigin,
            isDraining: { readiness.isDraining },
            nowMillis: { clock.nowMillis() },
            counters: provider,
            logger: logger
        )

        let budget = RequestBodyBudget(limit: configuration.requestBodyBudgetBytes)
        metrics.watch(budget)
        metrics.watch(core.queuedBudget)
        var listeners = listeners
        if cluster != nil, configuration.nodeAddress == nil, listeners.allSatisfy({ $0.tls != nil }) {
            // The other nodes speak cleartext HTTP/2 to a node: with TLS listeners only and no
            // --node-address, one on loopback serves them, which is enough on one host.
            listeners.append(ListenerConfiguration(host: "127.0.0.1", port: 0, name: "the cluster's loopback listener"))
        }
        let server = HTTPServer(
            listeners: listeners,
            configuration: configuration.server(budget: budget),
            application: mainRoutes,
            group: group,
            logger: logger
        )
        metrics.watch(server)
        var adminServer: HTTPServer?
        let adminListeners = configuration.adminListenerConfigurations()
        if !adminListeners.isEmpty {
            var adminLogger = logger
            adminLogger[metadataKey: "listener"] = "admin"
            let admin = HTTPServer(
                listeners: adminListeners,
                configuration: configuration.adminServer(budget: budget),
                application: operatorRoutes,
                group: group,
                logger: adminLogger
            )
            metrics.watch(admin)
            adminServer = admin
        }
        return AssembledGateway(
            server: server,
            adminServer: adminServer,
            core: core,
            console: console,
            readiness: readiness,
            reloader: reloader,
            cluster: cluster
        )
    }
}

/// A gateway built but not started: what `run` serves, and what tests start themselves with a
/// store and a clock of their own.
public struct AssembledGateway: Sendable {
    public let server: HTTPServer
    /// Serves the operator routes only; nil without admin listeners.
    public let adminServer: HTTPServer?
    public let core: DeliveryCore
    public let console: AdminConsole
    public let readiness: Readiness
    /// SIGHUP and `POST /v1/admin/reload`.
    public let reloader: ConfigurationReloader
    /// This gateway as a node of its database's cluster; nil on SQLite.
    public let cluster: ClusterNode?

    public struct Addresses: Sendable {
        public var main: [SocketAddress]
        public var admin: [SocketAddress]
    }

    /// Restores the state from the store, starts maintenance and the console, binds every
    /// listener, and is ready.
    public func start() async throws -> Addresses {
        let totals = try await core.restore()
        await console.start(storedTotals: totals)
        core.startMaintenance()
        do {
            let main = try await server.start()
            let admin: [SocketAddress]
            do {
                admin = try await adminServer?.start() ?? []
            } catch {
                await server.shutdownGracefully(deadline: .zero)
                throw error
            }
            try cluster?.start(listeners: zip(main, server.listeners).map { ($0, $1.tls == nil) })
            readiness.set(true)
            return Addresses(main: main, admin: admin)
        } catch {
            await core.stopMaintenance()
            await console.stop()
            throw error
        }
    }

    /// The drain, in order: `/readyz` answers 503 at once while everything else is served for
    /// `grace` (load balancers notice and stop sending traffic); then provider requests get
    /// `503 Shutdown`, every connection gets GOAWAY, and with it every device event stream ends
    /// with a retry hint (the device API's `onShutdown`); in-flight requests get up to
    /// `deadline`; then maintenance stops and the console writes its last totals. The store
    /// stays open: its owner closes it (which commits what is pending).
    public func stop(grace: Duration = .zero, deadline: TimeAmount) async {
        readiness.set(false)
        if grace > .zero { try? await Task.sleep(for: grace) }
        readiness.beginDraining()
        async let main: Void = server.shutdownGracefully(deadline: deadline)
        if let adminServer { await adminServer.shutdownGracefully(deadline: deadline) }
        await main
        // Every stream has ended: the other nodes may take this one's devices over at once.
        await cluster?.leave()
        await core.stopMaintenance()
        await console.stop()
    }
}
