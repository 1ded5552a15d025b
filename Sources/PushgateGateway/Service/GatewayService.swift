import Logging
import NIOCore
import PushgateDelivery
import PushgateHTTP
import PushgateStore
import PushgateTransport
import ServiceLifecycle

/// The running gateway as a lifecycle service: restores its state from the store, binds its
/// listeners, serves until a graceful shutdown is requested (SIGTERM/SIGINT), then drains and
/// closes the store.
public final class GatewayService: Service {
    public let server: HTTPServer
    public let readiness: Readiness
    private let core: DeliveryCore
    private let store: any NotificationStore
    private let shutdownDeadline: TimeAmount
    private let logger: Logger
    private let onStarted: @Sendable ([SocketAddress]) -> Void

    public init(
        server: HTTPServer,
        core: DeliveryCore,
        store: any NotificationStore,
        readiness: Readiness,
        shutdownDeadline: TimeAmount,
        logger: Logger,
        onStarted: @escaping @Sendable ([SocketAddress]) -> Void = { _ in }
    ) {
        self.server = server
        self.core = core
        self.store = store
        self.readiness = readiness
        self.shutdownDeadline = shutdownDeadline
        self.logger = logger
        self.onStarted = onStarted
    }

    public func run() async throws {
        try await core.restore()
        core.startMaintenance()
        let addresses: [SocketAddress]
        do {
            addresses = try await server.start()
        } catch {
            core.stopMaintenance()
            await store.close()
            throw error
        }
        readiness.set(true)
        onStarted(addresses)
        logger.info("pushgate ready")
        // Returns when a graceful shutdown is triggered; throws on cancellation, which also ends
        // the service (after draining below).
        try? await gracefulShutdown()
        readiness.beginDraining()
        logger.info("shutting down", metadata: ["shutdown.deadline": "\(shutdownDeadline)"])
        await server.shutdownGracefully(deadline: shutdownDeadline)
        core.stopMaintenance()
        // Every commit already waited for its fsync; this finishes any still in flight.
        await store.close()
        logger.info("stopped")
    }
}
