import Logging
import NIOCore
import NIOPosix
import PushgateDelivery
import PushgateDeviceAPI
import PushgateHTTP
import PushgateProviderAPI
import PushgateProviderAuth
import PushgateStore
import PushgateStoreSQLite
import PushgateTransport
import ServiceLifecycle

/// The composition root: builds the store, the delivery core, the routes and the listeners from a
/// `GatewayConfiguration`, and runs them as one service.
public enum Gateway {
    /// Runs the gateway until SIGTERM or SIGINT, then drains and returns. `onStarted` gets the
    /// bound addresses in listener order (cleartext, then TLS), port 0 resolved.
    public static func run(
        _ configuration: GatewayConfiguration,
        logger: Logger,
        onStarted: @escaping @Sendable ([(address: SocketAddress, isTLS: Bool)]) -> Void = { _ in }
    ) async throws {
        var configuration = configuration
        try configuration.validate()
        // The order of what can fail (and so of what a person is told first): TLS files, the
        // policy sources, exposure, then the store.
        let listeners = try configuration.listenerConfigurations()
        try configuration.readPolicySources(logger: logger)
        try configuration.checkExposure()
        let store = try SQLiteStore(directory: configuration.dataDirectory, logger: logger)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: configuration.threads)
        let gateway: AssembledGateway
        do {
            gateway = try assemble(configuration, listeners: listeners, store: store, group: group, logger: logger)
        } catch {
            await store.close()
            try? await group.shutdownGracefully()
            throw error
        }
        let tlsFlags = listeners.map { $0.tls != nil }
        let service = GatewayService(
            server: gateway.server,
            core: gateway.core,
            store: store,
            readiness: gateway.readiness,
            shutdownDeadline: .seconds(Int64(configuration.shutdownTimeoutSeconds)),
            logger: logger
        ) { addresses in
            onStarted(Array(zip(addresses, tlsFlags).map { (address: $0, isTLS: $1) }))
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

    /// A gateway built but not started: what `run` serves, and what tests start themselves
    /// with a store and a clock of their own.
    public struct AssembledGateway: Sendable {
        public let server: HTTPServer
        public let core: DeliveryCore
        public let readiness: Readiness
    }

    /// Builds the delivery core (not yet restored), the routes and the server on `listeners`.
    public static func assemble(
        _ configuration: GatewayConfiguration,
        listeners: [ListenerConfiguration],
        store: any NotificationStore,
        group: any EventLoopGroup,
        clock: any DeliveryClock = SystemClock(),
        logger: Logger
    ) throws -> AssembledGateway {
        let readiness = Readiness()
        let core = try DeliveryCore(group: group, store: store, clock: clock, configuration: configuration.delivery, logger: logger)
        let server = HTTPServer(
            listeners: listeners,
            configuration: configuration.server,
            application: makeRouter(readiness: readiness, core: core, access: configuration.access, clock: clock),
            group: group,
            logger: logger
        )
        return AssembledGateway(server: server, core: core, readiness: readiness)
    }

    /// The gateway's routes; each API registers its own.
    static func makeRouter(
        readiness: Readiness,
        core: DeliveryCore,
        access: AccessConfiguration,
        clock: any DeliveryClock
    ) -> Router {
        var router = Router()
        HealthRoutes.register(on: &router, readiness: readiness)
        let gate = ProviderGate(
            authenticator: access.providers,
            isDraining: { readiness.isDraining },
            maxConsecutiveErrors: access.maxConsecutiveProviderErrors,
            nowMillis: { clock.nowMillis() }
        )
        ProviderRoute.register(on: &router, core: core, validator: ProviderRequestValidator(), gate: gate)
        DeviceRoutes.register(on: &router, core: core, registrationSecret: access.registrationSecret)
        return router
    }
}
