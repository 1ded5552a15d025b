import Logging
import NIOCore
import PushgateDelivery
import PushgateHTTP
import PushgateStore
import PushgateTransport
import ServiceLifecycle
import UnixSignals

/// The running gateway as a lifecycle service: restores its state from the store, binds its
/// listeners, serves until a graceful shutdown is requested (SIGTERM/SIGINT), then drains and
/// closes the store.
public final class GatewayService: Service {
    public let gateway: AssembledGateway
    private let store: any NotificationStore
    private let shutdownDeadline: TimeAmount
    private let drainGrace: Duration
    private let logger: Logger
    private let onStarted: @Sendable (AssembledGateway.Addresses) -> Void

    public init(
        gateway: AssembledGateway,
        store: any NotificationStore,
        shutdownDeadline: TimeAmount,
        drainGrace: Duration = .zero,
        logger: Logger,
        onStarted: @escaping @Sendable (AssembledGateway.Addresses) -> Void = { _ in }
    ) {
        self.gateway = gateway
        self.store = store
        self.shutdownDeadline = shutdownDeadline
        self.drainGrace = drainGrace
        self.logger = logger
        self.onStarted = onStarted
    }

    public func run() async throws {
        // Trapped before anything is bound, so that a SIGHUP never finds its default action
        // (ending the process).
        let hangups = await UnixSignalsSequence(trapping: .sighup)
        let reloads = Task { [gateway] in
            for await _ in hangups { _ = await gateway.reloader.reload(trigger: "SIGHUP") }
        }
        defer { reloads.cancel() }
        let addresses: AssembledGateway.Addresses
        do {
            addresses = try await gateway.start()
        } catch {
            await store.close()
            throw error
        }
        onStarted(addresses)
        logger.info("pushgate ready")
        // Returns when a graceful shutdown is triggered; throws on cancellation, which also ends
        // the service (after draining below).
        try? await gracefulShutdown()
        logger.info("draining", metadata: ["drain.grace": "\(drainGrace)", "shutdown.deadline": "\(shutdownDeadline)"])
        await gateway.stop(grace: drainGrace, deadline: shutdownDeadline)
        // Every commit already waited for its fsync; this finishes any still in flight.
        await store.close()
        logger.info("stopped")
    }
}
