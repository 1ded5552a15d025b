import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import PushgateTLS
import PushgateTestFixtures
import PushgateTransport

enum Fixtures {
    static func tls(_ name: String) -> String { TestFixtures.tls(name) }

    static func serverContext(clientCA: Bool = false) throws -> TLSContext {
        try TLSContext.server(
            TLSServerConfiguration(
                certificateChainPath: tls("server.pem"),
                privateKeyPath: tls("server-key.pem"),
                clientCAPath: clientCA ? tls("ca.pem") : nil
            )
        )
    }

    static func clientContext(
        certificate: String? = nil,
        alpn: [String] = ["h2"],
        trustRoots: String = "ca.pem"
    ) throws -> TLSContext {
        try TLSContext.client(
            TLSClientConfiguration(
                trustRootsPath: tls(trustRoots),
                certificateChainPath: certificate.map { tls("\($0).pem") },
                privateKeyPath: certificate.map { tls("\($0)-key.pem") },
                serverName: "localhost",
                alpnProtocols: alpn
            )
        )
    }
}

/// What the test application exposes to the tests: writers and responders it was handed, and
/// the figures it measured.
final class TestHooks: Sendable {
    let streamWriter: EventLoopPromise<ResponseBodyWriter>
    let streamClosed: EventLoopPromise<ResponseBodyWriter.CloseReason>
    let slowResponders = NIOLockedValueBox<[HTTPResponder]>([])
    let slowArrived: NIOLockedValueBox<(count: Int, waiter: EventLoopPromise<Void>?, target: Int)>
    let firehose = NIOLockedValueBox(FirehoseStats())
    /// The firehose starts writing only once the test has stopped reading.
    let firehoseGo: EventLoopPromise<Void>
    let firehoseBlocked: EventLoopPromise<Void>
    let firehoseDone: EventLoopPromise<FirehoseStats>

    struct FirehoseStats: Sendable {
        var accepted = 0
        var maxStreamBuffered = 0
        var maxConnectionBuffered = 0
        var timesBlocked = 0
    }

    init(eventLoop: any EventLoop) {
        streamWriter = eventLoop.makePromise()
        streamClosed = eventLoop.makePromise()
        firehoseGo = eventLoop.makePromise()
        firehoseBlocked = eventLoop.makePromise()
        firehoseDone = eventLoop.makePromise()
        slowArrived = NIOLockedValueBox((0, nil, 0))
    }

    /// Completes once `count` slow requests have arrived.
    func waitForSlowRequests(_ count: Int, on eventLoop: any EventLoop) async throws {
        let promise = eventLoop.makePromise(of: Void.self)
        let ready = slowArrived.withLockedValue { state -> Bool in
            if state.count >= count { return true }
            state.waiter = promise
            state.target = count
            return false
        }
        if ready { promise.succeed() }
        try await promise.futureResult.get()
    }

    func releaseSlowRequests() {
        let responders = slowResponders.withLockedValue { list in
            defer { list = [] }
            return list
        }
        for responder in responders { responder.respond(HTTPServerResponse(status: 200, text: "slow done")) }
    }

    func cancelAll() {
        streamWriter.fail(CancellationError())
        streamClosed.fail(CancellationError())
        firehoseGo.fail(CancellationError())
        firehoseBlocked.fail(CancellationError())
        firehoseDone.fail(CancellationError())
        let waiter = slowArrived.withLockedValue { $0.waiter }
        waiter?.fail(CancellationError())
    }
}

struct TestApplication: HTTPServerHandler {
    let hooks: TestHooks

    func handle(_ request: HTTPServerRequest, responder: HTTPResponder) {
        let path = request.path.split(separator: "?").first.map(String.init) ?? request.path
        let query = request.path.split(separator: "?").dropFirst().first.map(String.init) ?? ""
        switch (request.method, path) {
        case ("GET", "/hello"):
            responder.respond(HTTPServerResponse(status: 200, text: "hello"))
        case ("POST", "/echo"):
            responder.respond(HTTPServerResponse(status: 200, body: request.body))
        case ("GET", "/bytes"):
            let count = Int(query.dropFirst(2)) ?? 0
            responder.respond(HTTPServerResponse(status: 200, body: Self.pattern(count)))
        case ("GET", "/target"):
            responder.respond(
                HTTPServerResponse(status: 200, text: "path=\(request.path) authority=\(request.authority ?? "none")")
            )
        case ("GET", "/conn"):
            let info = request.connection
            let text =
                "version=\(info.httpVersion.rawValue) tls=\(info.isTLS) alpn=\(info.negotiatedProtocol ?? "none") uid=\(info.peerCertificate?.userID ?? "none")"
            responder.respond(HTTPServerResponse(status: 200, text: text))
        case ("GET", "/stream"):
            let hooks = self.hooks
            responder.startStream(ResponseHead(status: 200, headers: ["content-type": "text/event-stream"])).whenSuccess
            { writer in
                writer.onClose = { hooks.streamClosed.succeed($0) }
                hooks.streamWriter.succeed(writer)
            }
        case ("GET", "/grant"):
            request.connection.markAuthenticated()
            responder.respond(HTTPServerResponse(status: 200, text: "granted"))
        case ("GET", "/goaway"):
            responder.respond(HTTPServerResponse(status: 200, text: "bye"))
            request.connection.goAway(debugData: Array(query.dropFirst(2).utf8))
        case ("GET", "/slow"):
            hooks.slowResponders.withLockedValue { $0.append(responder) }
            let waiter = hooks.slowArrived.withLockedValue { state -> EventLoopPromise<Void>? in
                state.count += 1
                guard state.count >= state.target, let waiter = state.waiter else { return nil }
                state.waiter = nil
                return waiter
            }
            waiter?.succeed()
        case ("GET", "/firehose"):
            let total = Int(query.dropFirst(2)) ?? 0
            let hooks = self.hooks
            responder.startStream(ResponseHead(status: 200)).whenSuccess { writer in
                hooks.firehoseGo.futureResult.hop(to: writer.eventLoop).whenSuccess {
                    Firehose(writer: writer, total: total, hooks: hooks).start()
                }
            }
        default:
            responder.respond(HTTPServerResponse(status: 404, text: "no such test route"))
        }
    }

    static func pattern(_ count: Int) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.reserveCapacity(count)
        for i in 0..<count { buffer.writeInteger(UInt8(truncatingIfNeeded: i % 251)) }
        return buffer
    }
}

/// Writes `total` bytes as fast as the writer takes them, recording how much the server holds.
final class Firehose: @unchecked Sendable {
    private let writer: ResponseBodyWriter
    private let total: Int
    private let hooks: TestHooks
    private var sent = 0
    private let chunk = TestApplication.pattern(16 * 1024)

    init(writer: ResponseBodyWriter, total: Int, hooks: TestHooks) {
        self.writer = writer
        self.total = total
        self.hooks = hooks
    }

    func start() {
        writer.onWritable = { [self] in pump() }
        pump()
    }

    private func pump() {
        while sent < total {
            let result = writer.write(chunk)
            let streamBuffered = writer.bufferedBytes
            let connectionBuffered = writer.connectionBufferedBytes
            let accepted = result == .accepted ? chunk.readableBytes : 0
            sent += accepted
            hooks.firehose.withLockedValue {
                $0.accepted += accepted
                $0.maxStreamBuffered = max($0.maxStreamBuffered, streamBuffered)
                $0.maxConnectionBuffered = max($0.maxConnectionBuffered, connectionBuffered)
                if result == .full { $0.timesBlocked += 1 }
            }
            if result == .full {
                hooks.firehoseBlocked.succeed()
                return
            }
            if result == .closed { return }
        }
        writer.finish()
        hooks.firehoseDone.succeed(hooks.firehose.withLockedValue { $0 })
    }
}

/// A running server on ephemeral ports, with its hooks.
struct TestServer {
    let group: MultiThreadedEventLoopGroup
    let server: HTTPServer
    let hooks: TestHooks
    let addresses: [SocketAddress]

    var port: Int { addresses[0].port! }
    func port(_ index: Int) -> Int { addresses[index].port! }

    func connect(listener: Int = 0, tls: TLSContext? = nil) async throws -> HTTP2ClientConnection {
        try await HTTP2ClientConnection.connect(
            host: "127.0.0.1",
            port: port(listener),
            tls: tls,
            serverName: "localhost",
            group: group
        )
    }
}

func withTestServer(
    tls: [TLSContext] = [],
    cleartext: Bool = true,
    configure: (inout HTTPServerConfiguration) -> Void = { _ in },
    logger: Logger? = nil,
    _ body: (TestServer) async throws -> Void
) async throws {
    let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
    let hooks = TestHooks(eventLoop: group.next())
    var configuration = HTTPServerConfiguration()
    configure(&configuration)
    var listeners: [ListenerConfiguration] = cleartext ? [ListenerConfiguration(host: "127.0.0.1", port: 0)] : []
    listeners += tls.map { ListenerConfiguration(host: "127.0.0.1", port: 0, tls: TLSContextSource($0)) }
    let logger =
        logger
        ?? {
            var logger = Logger(label: "test")
            // PUSHGATE_TEST_LOG=debug shows the server's logs when a test needs explaining.
            logger.logLevel =
                ProcessInfo.processInfo.environment["PUSHGATE_TEST_LOG"].flatMap(Logger.Level.init(rawValue:))
                ?? .critical
            return logger
        }()
    let server = HTTPServer(
        listeners: listeners,
        configuration: configuration,
        application: TestApplication(hooks: hooks),
        group: group,
        logger: logger
    )
    let addresses = try await server.start()
    do {
        try await body(TestServer(group: group, server: server, hooks: hooks, addresses: addresses))
    } catch {
        await server.shutdownGracefully(deadline: .milliseconds(100))
        hooks.cancelAll()
        try await group.shutdownGracefully()
        throw error
    }
    await server.shutdownGracefully(deadline: .milliseconds(100))
    hooks.cancelAll()
    try await group.shutdownGracefully()
}

/// A plain TCP client for bytes no well-behaved HTTP client would send.
final class RawConnection: Sendable {
    private final class Collector: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        let received = NIOLockedValueBox(ByteBuffer())

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            var bytes = unwrapInboundIn(data)
            received.withLockedValue { _ = $0.writeBuffer(&bytes) }
        }
    }

    let channel: any Channel
    private let collector: Collector

    private init(channel: any Channel, collector: Collector) {
        self.channel = channel
        self.collector = collector
    }

    static func connect(port: Int, group: any EventLoopGroup) async throws -> RawConnection {
        let collector = Collector()
        let channel = try await ClientBootstrap(group: group)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(collector) }
            }
            .connect(host: "127.0.0.1", port: port)
            .get()
        return RawConnection(channel: channel, collector: collector)
    }

    func send(_ bytes: [UInt8]) async throws {
        try await channel.writeAndFlush(ByteBuffer(bytes: bytes)).get()
    }

    func send(_ text: String) async throws { try await send(Array(text.utf8)) }

    /// Waits until the server closes the connection and returns everything it sent.
    func receiveUntilClosed() async throws -> ByteBuffer {
        try await channel.closeFuture.get()
        return collector.received.withLockedValue { $0 }
    }
}
