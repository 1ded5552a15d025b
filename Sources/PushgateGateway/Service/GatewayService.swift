import Logging
import NIOCore
import PushgateRouting
import PushgateTransport
import ServiceLifecycle

/// The running gateway as a lifecycle service: binds its listeners, serves until a graceful
/// shutdown is requested (SIGTERM/SIGINT), then drains.
public final class GatewayService: Service {
    public let server: HTTPServer
    public let readiness: Readiness
    private let shutdownDeadline: TimeAmount
    private let logger: Logger
    private let onStarted: @Sendable ([SocketAddress]) -> Void

    public init(
        server: HTTPServer,
        readiness: Readiness,
        shutdownDeadline: TimeAmount,
        logger: Logger,
        onStarted: @escaping @Sendable ([SocketAddress]) -> Void = { _ in }
    ) {
        self.server = server
        self.readiness = readiness
        self.shutdownDeadline = shutdownDeadline
        self.logger = logger
        self.onStarted = onStarted
    }

    public func run() async throws {
        let addresses = try await server.start()
        readiness.set(true)
        onStarted(addresses)
        logger.info("pushgate ready")
        // Returns when a graceful shutdown is triggered; throws on cancellation, which also ends
        // the service (after draining below).
        try? await gracefulShutdown()
        readiness.set(false)
        logger.info("shutting down", metadata: ["shutdown.deadline": "\(shutdownDeadline)"])
        await server.shutdownGracefully(deadline: shutdownDeadline)
        logger.info("stopped")
    }
}
