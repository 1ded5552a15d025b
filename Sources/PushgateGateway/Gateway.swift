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
        try configuration.validate()
        let listeners = try configuration.listenerConfigurations()
        try configuration.checkExposure()
        logger.info(
            "access",
            metadata: [
                "providers.keys": "\(configuration.access.providers.keyring.keys.map(\.keyID))",
                "providers.client_certificates": "\(configuration.access.providers.acceptsClientCertificates)",
                "devices.registration_secret": "\(configuration.access.registrationSecret != nil)",
            ]
        )
        let store = try SQLiteStore(directory: configuration.dataDirectory, logger: logger)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: configuration.threads)
        let readiness = Readiness()
        let core = try DeliveryCore(group: group, store: store, configuration: configuration.delivery, logger: logger)
        let server = HTTPServer(
            listeners: listeners,
            configuration: configuration.server,
            application: makeRouter(readiness: readiness, core: core, access: configuration.access),
            group: group,
            logger: logger
        )
        let tlsFlags = listeners.map { $0.tls != nil }
        let gateway = GatewayService(
            server: server,
            core: core,
            store: store,
            readiness: readiness,
            shutdownDeadline: .seconds(Int64(configuration.shutdownTimeoutSeconds)),
            logger: logger
        ) { addresses in
            onStarted(Array(zip(addresses, tlsFlags).map { (address: $0, isTLS: $1) }))
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

    /// The gateway's routes; each API registers its own.
    public static func makeRouter(
        readiness: Readiness,
        core: DeliveryCore,
        access: AccessConfiguration = AccessConfiguration(),
        validator: ProviderRequestValidator = ProviderRequestValidator(),
        clock: any DeliveryClock = SystemClock()
    ) -> Router {
        var router = Router()
        HealthRoutes.register(on: &router, readiness: readiness)
        let gate = ProviderGate(
            authenticator: access.providers,
            isDraining: { readiness.isDraining },
            maxConsecutiveErrors: access.maxConsecutiveProviderErrors,
            nowMillis: { clock.nowMillis() }
        )
        ProviderRoute.register(on: &router, core: core, validator: validator, gate: gate)
        DeviceRoutes.register(on: &router, core: core, registrationSecret: access.registrationSecret)
        return router
    }
}
