import NIOCore
import NIOEmbedded
import NIOTLS
import PushgateTLS

/// Sits above a ``TLSHandler`` and keeps everything that reaches it: plaintext, TLS events, errors.
final class EventRecorder: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    private(set) var received = ByteBuffer()
    private(set) var events: [TLSUserEvent] = []
    private(set) var errors: [any Error] = []
    private(set) var readCompleteCount = 0

    var tlsErrors: [TLSError] {
        errors.compactMap { $0 as? TLSError }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var plaintext = unwrapInboundIn(data)
        received.writeBuffer(&plaintext)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        readCompleteCount += 1
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? TLSUserEvent {
            events.append(event)
        }
    }

    // Kept here rather than passed on, so EmbeddedChannel.writeInbound does not rethrow them.
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        errors.append(error)
    }
}

/// A TLS client and server in two EmbeddedChannels, connected by moving bytes between them by hand.
struct TLSChannelPair {
    let client = EmbeddedChannel()
    let server = EmbeddedChannel()
    let clientHandler: TLSHandler
    let serverHandler: TLSHandler
    let clientRecorder = EventRecorder()
    let serverRecorder = EventRecorder()

    /// The server's handler is added before its channel becomes active and the client's after, so
    /// both ways of starting (channelActive and handlerAdded) are exercised by every test, unless
    /// `clientAddedBeforeActive` moves the client to the first way too.
    init(
        server serverContext: TLSContext,
        client clientContext: TLSContext,
        clientServerName: String? = nil,
        clientAddedBeforeActive: Bool = false
    ) throws {
        clientHandler = TLSHandler(context: clientContext, serverName: clientServerName)
        serverHandler = TLSHandler(context: serverContext)

        try server.pipeline.syncOperations.addHandlers([serverHandler, serverRecorder])
        try server.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()

        if clientAddedBeforeActive {
            try client.pipeline.syncOperations.addHandlers([clientHandler, clientRecorder])
            try client.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
        } else {
            try client.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
            try client.pipeline.syncOperations.addHandlers([clientHandler, clientRecorder])
        }
    }

    /// Moves ciphertext both ways until neither side has anything more to send. Returns how many
    /// buffers each side wrote.
    @discardableResult
    func interact() throws -> (fromClient: Int, fromServer: Int) {
        var total = (fromClient: 0, fromServer: 0)
        while true {
            let fromClient = try Self.move(from: client, to: server)
            let fromServer = try Self.move(from: server, to: client)
            total.fromClient += fromClient
            total.fromServer += fromServer
            if fromClient == 0 && fromServer == 0 {
                return total
            }
        }
    }

    private static func move(from source: EmbeddedChannel, to destination: EmbeddedChannel) throws -> Int {
        var count = 0
        while let ciphertext = try source.readOutbound(as: ByteBuffer.self) {
            count += 1
            // A closed peer is a dropped TCP connection: what was in flight is lost.
            if destination.isActive {
                try destination.writeInbound(ciphertext)
            }
        }
        return count
    }
}

/// The result of a future on an EmbeddedEventLoop, as soon as it is known.
final class Outcome<Value> {
    private(set) var result: Result<Value, any Error>?

    init(_ future: EventLoopFuture<Value>) {
        future.assumeIsolated().whenComplete { self.result = $0 }
    }

    var succeeded: Bool {
        if case .success = result { return true }
        return false
    }

    var error: (any Error)? {
        if case .failure(let error) = result { return error }
        return nil
    }
}
