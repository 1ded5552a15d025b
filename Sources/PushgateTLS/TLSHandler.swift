import NIOCore
import NIOTLS

/// Terminates (server) or originates (client) TLS on a channel, with OpenSSL doing the cryptography.
///
/// Put it first in the pipeline: below it flows ciphertext, above it plaintext. The role comes from
/// the ``TLSContext``. A client starts the handshake as soon as the channel is active (or at once if
/// added to an active channel); a server waits for the ClientHello.
///
/// Events sent up the pipeline:
/// - `TLSUserEvent.handshakeCompleted(negotiatedProtocol:)` once, when the handshake succeeds;
///   ``negotiatedProtocol`` and ``peerCertificate`` are already set when it arrives.
/// - `TLSUserEvent.shutdownCompleted` when the peer sends close_notify; the channel then closes.
/// - A ``TLSError`` through `errorCaught` when the handshake or a record fails; the channel closes
///   right after, once any alert OpenSSL produced has been written.
///
/// Plaintext written before the handshake completes is held and sent after it. Writes are coalesced:
/// everything written before a `flush` is encrypted in one go and sent as one buffer, so many small
/// writes do not become many tiny TLS records.
public final class TLSHandler: ChannelDuplexHandler, RemovableChannelHandler {
    public typealias InboundIn = ByteBuffer
    public typealias InboundOut = ByteBuffer
    public typealias OutboundIn = ByteBuffer
    public typealias OutboundOut = ByteBuffer

    private enum State {
        /// Not yet in an active channel.
        case idle
        case handshaking
        case active
        /// We sent close_notify and half-closed the output; still reading until the peer's.
        case outputClosed
        /// Closed or closing; nothing more goes through OpenSSL.
        case closed
    }

    private struct BufferedWrite {
        var plaintext: ByteBuffer
        var promise: EventLoopPromise<Void>?
    }

    /// The ALPN protocol agreed in the handshake; nil before it completes or when none was agreed.
    public private(set) var negotiatedProtocol: String?
    /// The peer's certificate once the handshake has completed, and only if the peer sent one and it
    /// verified (on a server: a client certificate checked against the client CAs).
    public private(set) var peerCertificate: PeerCertificate?

    private let tlsContext: TLSContext
    private let serverName: String?
    private var connection: TLSConnection?
    private var state = State.idle
    /// A client has read its peer's first bytes (and seen they are TLS).
    private var peerAnswered = false
    /// Plaintext not yet handed to OpenSSL; the mark is the last write covered by a `flush`.
    private var bufferedWrites = MarkedCircularBuffer<BufferedWrite>(initialCapacity: 4)

    /// - Parameters:
    ///   - context: Certificates and settings, shared by all connections of a listener or upstream.
    ///   - serverName: Client only: overrides ``TLSClientConfiguration/serverName`` for this
    ///     connection (SNI and certificate name check).
    public init(context: TLSContext, serverName: String? = nil) {
        self.tlsContext = context
        self.serverName = serverName ?? context.serverName
    }

    public func handlerAdded(context: ChannelHandlerContext) {
        do {
            self.connection = try TLSConnection(context: self.tlsContext, serverName: self.serverName)
        } catch {
            self.state = .closed
            context.fireErrorCaught(error)
            context.close(promise: nil)
            return
        }
        if context.channel.isActive {
            self.startHandshake(context: context)
        }
    }

    public func handlerRemoved(context: ChannelHandlerContext) {
        self.failBufferedWrites(ChannelError.ioOnClosedChannel)
    }

    public func channelActive(context: ChannelHandlerContext) {
        // Forwarded first so that, if the handshake fails at once, handlers above see active before
        // inactive.
        context.fireChannelActive()
        if case .idle = self.state {
            self.startHandshake(context: context)
        }
    }

    public func channelInactive(context: ChannelHandlerContext) {
        self.state = .closed
        self.failBufferedWrites(ChannelError.ioOnClosedChannel)
        context.fireChannelInactive()
    }

    public func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .idle = self.state {
            // Only a channel that never became active (an EmbeddedChannel never connected) delivers
            // bytes first; they can only be the start of a handshake.
            self.startHandshake(context: context)
        }
        switch self.state {
        case .handshaking, .active, .outputClosed:
            break
        case .idle, .closed:
            return
        }
        guard let connection = self.connection else {
            return
        }
        let ciphertext = self.unwrapInboundIn(data)
        if !self.peerAnswered, self.tlsContext.role == .client, ciphertext.readableBytes > 0 {
            self.peerAnswered = true
            if let answer = Self.notTLS(ciphertext) {
                self.fail(
                    TLSError(
                        "the server answered in cleartext, not TLS (its answer began \"\(answer)\")",
                        kind: .notTLS(answer: answer)
                    ),
                    context: context
                )
                return
            }
        }
        do {
            try connection.receive(ciphertext)
        } catch {
            self.fail(error, context: context)
            return
        }
        if case .handshaking = self.state {
            self.advanceHandshake(context: context)
        }
        switch self.state {
        case .active, .outputClosed:
            // Application data may follow the handshake's last message in the same read.
            self.readPlaintext(context: context)
        case .idle, .handshaking, .closed:
            break
        }
    }

    public func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch self.state {
        case .idle, .handshaking, .active:
            self.bufferedWrites.append(BufferedWrite(plaintext: self.unwrapOutboundIn(data), promise: promise))
        case .outputClosed, .closed:
            promise?.fail(ChannelError.ioOnClosedChannel)
        }
    }

    public func flush(context: ChannelHandlerContext) {
        self.bufferedWrites.mark()
        if case .active = self.state {
            self.writeFlushedPlaintext(context: context)
        }
    }

    public func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        switch (self.state, mode) {
        case (_, .input), (.closed, _), (.outputClosed, .output):
            break
        case (.active, _):
            self.connection?.shutdown()
            self.flushCiphertext(context: context)
            self.state = mode == .output ? .outputClosed : .closed
        case (.idle, _), (.handshaking, _), (.outputClosed, _):
            self.state = .closed
        }
        if mode != .input {
            // Writes never flushed are dropped, as any channel drops them on close.
            self.failBufferedWrites(ChannelError.ioOnClosedChannel)
        }
        context.close(mode: mode, promise: promise)
    }

    private func startHandshake(context: ChannelHandlerContext) {
        guard self.connection != nil else {
            return
        }
        self.state = .handshaking
        if self.tlsContext.role == .client {
            self.advanceHandshake(context: context)
        }
    }

    private func advanceHandshake(context: ChannelHandlerContext) {
        guard let connection = self.connection else {
            return
        }
        switch connection.doHandshake() {
        case .needsMoreInput:
            self.flushCiphertext(context: context)
        case .failed(let error):
            self.fail(error, context: context)
        case .complete:
            self.state = .active
            self.negotiatedProtocol = connection.negotiatedProtocol
            self.peerCertificate = connection.verifiedPeerCertificate
            self.flushCiphertext(context: context)
            context.fireUserInboundEventTriggered(
                TLSUserEvent.handshakeCompleted(negotiatedProtocol: self.negotiatedProtocol)
            )
            // The event may have closed the channel.
            if case .active = self.state {
                self.writeFlushedPlaintext(context: context)
            }
        }
    }

    private func readPlaintext(context: ChannelHandlerContext) {
        guard let connection = self.connection else {
            return
        }
        var plaintext = context.channel.allocator.buffer(capacity: 0)
        let outcome = connection.readPlaintext(into: &plaintext)
        // Reading can produce output too: a TLS 1.3 KeyUpdate answer, or the alert for a bad record.
        self.flushCiphertext(context: context)
        if plaintext.readableBytes > 0 {
            context.fireChannelRead(self.wrapInboundOut(plaintext))
        }
        switch (outcome, self.state) {
        case (_, .closed):
            // Whoever got the plaintext closed the channel; what follows it no longer matters.
            break
        case (.needsMoreInput, _):
            break
        case (.peerClosed, let state):
            self.state = .closed
            if case .active = state {
                // Answer in kind, so the peer knows it got everything we sent.
                connection.shutdown()
                self.flushCiphertext(context: context)
            }
            context.fireUserInboundEventTriggered(TLSUserEvent.shutdownCompleted)
            context.close(promise: nil)
        case (.failed(let error), _):
            self.fail(error, context: context)
        }
    }

    private func writeFlushedPlaintext(context: ChannelHandlerContext) {
        guard let connection = self.connection, self.bufferedWrites.hasMark else {
            return
        }
        var flushed: [BufferedWrite] = []
        while self.bufferedWrites.hasMark, let write = self.bufferedWrites.popFirst() {
            flushed.append(write)
        }
        var plaintext: ByteBuffer
        if flushed.count == 1 {
            plaintext = flushed[0].plaintext
        } else {
            plaintext = context.channel.allocator.buffer(
                capacity: flushed.reduce(0) { $0 + $1.plaintext.readableBytes }
            )
            for write in flushed {
                plaintext.writeImmutableBuffer(write.plaintext)
            }
        }
        let promises = flushed.compactMap(\.promise)
        do {
            try connection.writePlaintext(plaintext)
        } catch {
            for promise in promises {
                promise.fail(error)
            }
            self.fail(error, context: context)
            return
        }
        self.flushCiphertext(context: context, promise: Self.combine(promises, on: context.eventLoop))
    }

    /// Writes and flushes whatever OpenSSL has produced for the peer. With a promise, also when that
    /// is nothing, so the promise completes in order with the writes before it.
    private func flushCiphertext(context: ChannelHandlerContext, promise: EventLoopPromise<Void>? = nil) {
        var ciphertext = self.connection?.drainCiphertext(allocator: context.channel.allocator)
        if ciphertext == nil && promise != nil {
            ciphertext = context.channel.allocator.buffer(capacity: 0)
        }
        guard let ciphertext else {
            return
        }
        context.writeAndFlush(self.wrapOutboundOut(ciphertext), promise: promise)
    }

    /// The start of `bytes` as text when they cannot begin a TLS record (content type 20 to 23,
    /// then major version 3), nil when they can: OpenSSL would call an HTTP/1.1 answer from a
    /// cleartext port a "wrong version number". Unprintable bytes show as `\xNN`.
    static func notTLS(_ bytes: ByteBuffer) -> String? {
        let start = bytes.readableBytesView.prefix(5)
        let recordStart =
            start.first.map { (20...23).contains($0) } == true && start.dropFirst().first.map { $0 == 3 } != false
        guard !recordStart else { return nil }
        let line = bytes.readableBytesView.prefix(64).prefix { $0 != UInt8(ascii: "\r") && $0 != UInt8(ascii: "\n") }
        return line.map { byte in
            (32...126).contains(byte)
                ? String(UnicodeScalar(byte)) : "\\x" + (byte < 16 ? "0" : "") + String(byte, radix: 16)
        }.joined()
    }

    private func fail(_ error: TLSError, context: ChannelHandlerContext) {
        self.state = .closed
        // The alert tells the peer why; it must go out before the close.
        self.flushCiphertext(context: context)
        self.failBufferedWrites(error)
        context.fireErrorCaught(error)
        context.close(promise: nil)
    }

    private func failBufferedWrites(_ error: any Error) {
        while let write = self.bufferedWrites.popFirst() {
            write.promise?.fail(error)
        }
    }

    private static func combine(
        _ promises: [EventLoopPromise<Void>],
        on eventLoop: any EventLoop
    ) -> EventLoopPromise<Void>? {
        guard promises.count > 1 else {
            return promises.first
        }
        let combined = eventLoop.makePromise(of: Void.self)
        for promise in promises {
            combined.futureResult.cascade(to: promise)
        }
        return combined
    }
}

@available(*, unavailable)
extension TLSHandler: Sendable {}
