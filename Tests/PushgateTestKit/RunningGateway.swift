import Foundation
import Logging
import NIOCore
import NIOPosix
import PushgateDelivery
import PushgateDeviceClient
import PushgateGateway
import PushgateOperator
import PushgateStore
import PushgateStoreSQLite
import PushgateStoreTestKit
import PushgateTransport

/// A gateway `withGateway` started, with what a test reaches it by.
public struct RunningGateway: Sendable {
    public let group: MultiThreadedEventLoopGroup
    /// For tests of stopping it (`withGateway` stops it too, after the test).
    public let assembled: AssembledGateway
    public let readiness: Readiness
    public let core: DeliveryCore
    public let console: AdminConsole
    public let port: Int
    /// The first admin listener's, when there is one.
    public let adminPort: Int?

    public var serverURL: ServerURL { ServerURL("http://127.0.0.1:\(port)")! }

    public func connect(host: String = "127.0.0.1", port: Int? = nil) async throws -> HTTP2ClientConnection {
        try await HTTP2ClientConnection.connect(host: host, port: port ?? self.port, group: group)
    }

    /// Sends raw HTTP/1.1 and returns everything the server sent until it closed.
    public func http1(_ request: String, host: String = "127.0.0.1", port: Int? = nil) async throws -> String {
        let collected = CollectedBytes()
        let channel = try await ClientBootstrap(group: group)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(collected) }
            }
            .connect(host: host, port: port ?? self.port)
            .get()
        try await channel.writeAndFlush(ByteBuffer(string: request)).get()
        try await channel.closeFuture.get()
        return try await channel.eventLoop.submit { collected.text }.get()
    }
}

private final class CollectedBytes: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer
    var text = ""

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        text += String(buffer: unwrapInboundIn(data))
    }
}

/// A gateway on an ephemeral port with a store in a fresh temporary directory (or `directory`,
/// to test a restart).
public func withGateway(
    directory: String? = nil,
    clock: any DeliveryClock = SystemClock(),
    access: AccessConfiguration = AccessConfiguration(),
    delivery: DeliveryConfiguration = DeliveryConfiguration(),
    faults: FaultyStore? = nil,
    configure: (inout GatewayConfiguration) -> Void = { _ in },
    reread: (@Sendable () throws -> GatewayConfiguration)? = nil,
    listenHost: String = "127.0.0.1",
    _ body: (RunningGateway) async throws -> Void
) async throws {
    let dataDirectory =
        directory
        ?? FileManager.default.temporaryDirectory
        .appendingPathComponent("pushgate-test-\(UUID().uuidString)").path
    defer { if directory == nil { try? FileManager.default.removeItem(atPath: dataDirectory) } }
    let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
    var logger = Logger(label: "test")
    logger.logLevel =
        ProcessInfo.processInfo.environment["PUSHGATE_TEST_LOG"].flatMap(Logger.Level.init(rawValue:)) ?? .critical
    let sqlite = try SQLiteStore(directory: dataDirectory, logger: logger)
    faults?.attach(sqlite)
    let store: any NotificationStore = faults ?? sqlite
    var configuration = GatewayConfiguration()
    configuration.access = access
    configuration.delivery = delivery
    // A test's connections may wait on a loaded machine for longer than the 15 s a connection
    // that has proven nothing gets (seen: 33 s); the tests of that timeout set it themselves.
    configuration.unauthenticatedIdleTimeoutSeconds = configuration.idleTimeoutSeconds
    configure(&configuration)
    let assembled = try Gateway.assemble(
        configuration,
        listeners: [ListenerConfiguration(host: listenHost, port: 0)],
        store: store,
        group: group,
        clock: clock,
        reread: reread,
        logger: logger
    )
    let addresses = try await assembled.start()
    let gateway = RunningGateway(
        group: group,
        assembled: assembled,
        readiness: assembled.readiness,
        core: assembled.core,
        console: assembled.console,
        port: addresses.main[0].port!,
        adminPort: addresses.admin.first?.port
    )
    var failure: (any Error)?
    do {
        try await body(gateway)
    } catch {
        failure = error
    }
    await assembled.stop(deadline: TimeAmount.milliseconds(100))
    await store.close()
    try await group.shutdownGracefully()
    if let failure { throw failure }
}
