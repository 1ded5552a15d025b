import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// An HTTP/2 client that writes frames by hand, for what no well-behaved client does: a request
/// whose body never ends, sent in as many DATA frames as the test likes. Header blocks are HPACK
/// literals (no table, no Huffman); what the server sends is only split into frames.
public final class RawHTTP2Client: Sendable {
    private final class Reader: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer

        private struct State {
            var pending = ByteBuffer()
            var frames: [WireFrame] = []
            var waiter: (until: @Sendable ([WireFrame]) -> Bool, promise: EventLoopPromise<[WireFrame]>)?
        }

        private let state = NIOLockedValueBox(State())

        /// The client preface with empty SETTINGS, written by the event loop as soon as the
        /// connection is up. Written from the test's task instead, it waited for a thread of the
        /// cooperative pool, which CI's parallel tests kept busy past the server's 10 s setup
        /// timeout: the server closed the connection before the preface came.
        func channelActive(context: ChannelHandlerContext) {
            let preface =
                Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)
                + WireFrame(type: 4, flags: 0, streamID: 0, payload: []).bytes
            context.writeAndFlush(wrapOutboundOut(ByteBuffer(bytes: preface)), promise: nil)
            context.fireChannelActive()
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            var bytes = unwrapInboundIn(data)
            let satisfied: (EventLoopPromise<[WireFrame]>, [WireFrame])? = state.withLockedValue { state in
                state.pending.writeBuffer(&bytes)
                state.frames += WireFrame.take(from: &state.pending)
                guard let waiter = state.waiter, waiter.until(state.frames) else { return nil }
                state.waiter = nil
                return (waiter.promise, state.frames)
            }
            if let (promise, frames) = satisfied { promise.succeed(frames) }
        }

        func channelInactive(context: ChannelHandlerContext) {
            let waiting = state.withLockedValue { state -> (EventLoopPromise<[WireFrame]>, [WireFrame])? in
                defer { state.waiter = nil }
                return state.waiter.map { ($0.promise, state.frames) }
            }
            if let (promise, frames) = waiting { promise.succeed(frames) }
            context.fireChannelInactive()
        }

        /// Completes with every frame so far once `until` holds for them, or the connection
        /// closed, or `timeout` passed (then with what there is: the test's expectations say
        /// what was missing).
        func frames(
            until: @escaping @Sendable ([WireFrame]) -> Bool,
            timeout: TimeAmount,
            on loop: any EventLoop
        ) -> EventLoopFuture<[WireFrame]> {
            let promise = loop.makePromise(of: [WireFrame].self)
            let ready: [WireFrame]? = state.withLockedValue { state in
                if until(state.frames) { return state.frames }
                state.waiter = (until, promise)
                return nil
            }
            if let ready { promise.succeed(ready) }
            let state = self.state
            let timer = loop.scheduleTask(in: timeout) {
                let frames = state.withLockedValue { state -> [WireFrame]? in
                    guard state.waiter?.promise.futureResult === promise.futureResult else { return nil }
                    state.waiter = nil
                    return state.frames
                }
                if let frames { promise.succeed(frames) }
            }
            promise.futureResult.whenComplete { _ in timer.cancel() }
            return promise.futureResult
        }
    }

    private let channel: any Channel
    private let reader: Reader

    private init(channel: any Channel, reader: Reader) {
        self.channel = channel
        self.reader = reader
    }

    /// Connects and sends the client preface with empty SETTINGS.
    public static func connect(
        host: String = "127.0.0.1",
        port: Int,
        group: any EventLoopGroup
    ) async throws -> RawHTTP2Client {
        let reader = Reader()
        let channel = try await ClientBootstrap(group: group)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(reader) }
            }
            .connect(host: host, port: port)
            .get()
        return RawHTTP2Client(channel: channel, reader: reader)
    }

    /// A header block in one HEADERS frame; pseudo-header fields first, as HTTP/2 wants them.
    public func sendHeaders(streamID: UInt32, _ fields: [(String, String)], endStream: Bool) async throws {
        var block: [UInt8] = []
        for (name, value) in fields {
            // Literal header field without indexing, new name (RFC 7541 section 6.2.2).
            block.append(0)
            block += Self.hpackString(name)
            block += Self.hpackString(value)
        }
        // END_HEADERS, and END_STREAM when asked.
        try await send(WireFrame(type: 1, flags: 0x4 | (endStream ? 0x1 : 0), streamID: streamID, payload: block).bytes)
    }

    /// A PING: its ack says the server has handled every frame sent before it.
    public func sendPing() async throws {
        try await send(WireFrame(type: 6, flags: 0, streamID: 0, payload: Array(repeating: 0, count: 8)).bytes)
    }

    public func sendData(streamID: UInt32, _ bytes: [UInt8], endStream: Bool) async throws {
        try await send(WireFrame(type: 0, flags: endStream ? 0x1 : 0, streamID: streamID, payload: bytes).bytes)
    }

    /// Every frame received so far once `until` holds for them, the connection closed, or
    /// `timeout` passed.
    public func frames(
        until: @escaping @Sendable ([WireFrame]) -> Bool,
        timeout: TimeAmount = .seconds(30)
    ) async throws -> [WireFrame] {
        try await reader.frames(until: until, timeout: timeout, on: channel.eventLoop).get()
    }

    public func close() async {
        try? await channel.close()
    }

    private func send(_ bytes: [UInt8]) async throws {
        try await channel.writeAndFlush(ByteBuffer(bytes: bytes)).get()
    }

    /// A string literal without Huffman coding: its length as a 7-bit-prefix integer (RFC 7541
    /// section 5.1), then its bytes.
    private static func hpackString(_ text: String) -> [UInt8] {
        let bytes = Array(text.utf8)
        var encoded: [UInt8] = []
        var length = bytes.count
        if length < 127 {
            encoded.append(UInt8(length))
        } else {
            encoded.append(127)
            length -= 127
            while length >= 128 {
                encoded.append(UInt8(length % 128 + 128))
                length /= 128
            }
            encoded.append(UInt8(length))
        }
        return encoded + bytes
    }
}

extension [WireFrame] {
    /// The body sent on `streamID`, as text.
    public func body(of streamID: UInt32) -> String {
        String(decoding: filter { $0.streamID == streamID && $0.kind == .data }.flatMap(\.payload), as: UTF8.self)
    }

    /// Whether the server's answer on `streamID` ended: END_STREAM on its last DATA or HEADERS.
    public func answered(_ streamID: UInt32) -> Bool {
        contains { $0.streamID == streamID && ($0.kind == .data || $0.kind == .headers) && $0.endStream }
    }

    /// The error code of the server's RST_STREAM on `streamID`, if it sent one.
    public func reset(of streamID: UInt32) -> UInt32? {
        first { $0.streamID == streamID && $0.kind == .rstStream }?.resetErrorCode
    }
}
