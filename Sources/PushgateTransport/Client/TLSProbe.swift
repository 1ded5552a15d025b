import NIOCore
import NIOPosix
import PushgateTLS

/// Whether a server speaks TLS: a ClientHello sent to it is answered with a TLS record (its
/// ServerHello, or an alert). Nothing is verified and nothing but the handshake is sent; the
/// connection is closed as soon as the first bytes are in.
enum TLSProbe {
    /// A TLS server answers a ClientHello at once; this bounds a server that says nothing.
    static let timeout: TimeAmount = .seconds(10)

    static func answers(host: String, port: Int, group: any EventLoopGroup) async -> Bool {
        guard let context = try? TLSContext.client(TLSClientConfiguration(verifyPeer: false)) else { return false }
        let channel: any Channel
        let answer: EventLoopFuture<Bool>
        do {
            (channel, answer) = try await ClientBootstrap(group: group)
                .connectTimeout(timeout)
                .connect(host: host, port: port) { channel in
                    channel.eventLoop.makeCompletedFuture {
                        let first = FirstBytes(eventLoop: channel.eventLoop)
                        // Below TLS: the bytes as they come off the wire.
                        try channel.pipeline.syncOperations.addHandler(first)
                        try channel.pipeline.syncOperations.addHandler(TLSHandler(context: context, serverName: host))
                        return (channel, first.isTLS.futureResult)
                    }
                }
        } catch {
            return false
        }
        let timer = channel.eventLoop.scheduleTask(in: timeout) { channel.close(promise: nil) }
        let isTLS = (try? await answer.get()) ?? false
        timer.cancel()
        try? await channel.close()
        return isTLS
    }

    /// Completes `isTLS` with whether the first bytes read start a TLS record; false when the
    /// connection ends before any.
    private final class FirstBytes: ChannelInboundHandler, RemovableChannelHandler {
        typealias InboundIn = ByteBuffer
        let isTLS: EventLoopPromise<Bool>
        private var decided = false

        init(eventLoop: any EventLoop) { isTLS = eventLoop.makePromise() }

        private func decide(_ answer: Bool) {
            guard !decided else { return }
            decided = true
            isTLS.succeed(answer)
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let start = unwrapInboundIn(data).readableBytesView.prefix(2)
            // A handshake record (the ServerHello) or an alert, version 3.x.
            decide((start.first == 22 || start.first == 21) && start.dropFirst().first == 3)
            context.close(promise: nil)
        }

        func channelInactive(context: ChannelHandlerContext) {
            decide(false)
            context.fireChannelInactive()
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            decide(false)
            context.close(promise: nil)
        }

        /// A connection refused never becomes active, so it has no `channelInactive`: its
        /// pipeline's teardown still decides, and the promise is never left behind.
        func handlerRemoved(context: ChannelHandlerContext) {
            decide(false)
        }
    }
}
