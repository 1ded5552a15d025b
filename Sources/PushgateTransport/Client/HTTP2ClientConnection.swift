import NIOCore
import NIOPosix
import PushgateTLS

/// One HTTP/2 connection to a server, over TLS or cleartext (prior knowledge), carrying any
/// number of concurrent requests.
public final class HTTP2ClientConnection: Sendable {
    public let channel: any Channel
    private let handler: NIOLoopBound<HTTP2ClientHandler>
    /// Completes with the server's first GOAWAY; fails if the connection closes without one.
    public let goAwayReceived: EventLoopFuture<HTTP2GoAway>

    private let settingsReceived: EventLoopFuture<Void>
    /// Where it goes, for a second look at a server that hung up on a cleartext connection.
    private let host: String
    private let port: Int
    private let isTLS: Bool

    private init(channel: any Channel, handler: HTTP2ClientHandler, host: String, port: Int, isTLS: Bool) {
        self.channel = channel
        self.host = host
        self.port = port
        self.isTLS = isTLS
        self.handler = NIOLoopBound(handler, eventLoop: channel.eventLoop)
        self.goAwayReceived = handler.goAwayFuture
        self.settingsReceived = handler.settingsFuture
    }

    /// Connects to `host:port`. With `tls`, the handshake (ALPN `h2` unless the context says
    /// otherwise) runs before any HTTP/2 bytes leave; its failure fails the first request.
    public static func connect(
        host: String,
        port: Int,
        tls: TLSContext? = nil,
        serverName: String? = nil,
        limits: HTTP2SessionLimits = HTTP2SessionLimits(),
        maxResponseBodySize: Int = 64 * 1024 * 1024,
        settingsTimeout: TimeAmount = .seconds(10),
        group: any EventLoopGroup
    ) async throws -> HTTP2ClientConnection {
        do {
            return try await bootstrap(
                host: host,
                port: port,
                tls: tls,
                serverName: serverName,
                limits: limits,
                maxResponseBodySize: maxResponseBodySize,
                settingsTimeout: settingsTimeout,
                group: group
            )
        } catch let error as NIOConnectionError {
            // NIO's own text nests every attempt's error ("SingleConnectionFailure(target: ...")
            // and calls a refusal a reset: the person running a client wants the cause.
            throw HTTP2ClientError.cannotConnect(host: host, port: port, reason: Self.reason(error))
        }
    }

    private static func reason(_ error: NIOConnectionError) -> String {
        if let failure = error.connectionErrors.last {
            if let io = failure.error as? IOError { return String(cString: strerror(io.errnoCode)).lowercased() }
            return "\(failure.error)"
        }
        if let resolution = error.dnsAAAAError ?? error.dnsAError { return "the name did not resolve (\(resolution))" }
        return "\(error)"
    }

    private static func bootstrap(
        host: String,
        port: Int,
        tls: TLSContext?,
        serverName: String?,
        limits: HTTP2SessionLimits,
        maxResponseBodySize: Int,
        settingsTimeout: TimeAmount,
        group: any EventLoopGroup
    ) async throws -> HTTP2ClientConnection {
        try await ClientBootstrap(group: group)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .connect(host: host, port: port) { channel in
                // The handler is captured here, not looked up later: a refused handshake may
                // already have torn the pipeline down by the time the caller resumes.
                channel.eventLoop.makeCompletedFuture {
                    let operations = channel.pipeline.syncOperations
                    if let tls { try operations.addHandler(TLSHandler(context: tls, serverName: serverName ?? host)) }
                    let handler = HTTP2ClientHandler(
                        host: host,
                        port: port,
                        limits: limits,
                        maxResponseBodySize: maxResponseBodySize,
                        settingsTimeout: settingsTimeout,
                        eventLoop: channel.eventLoop
                    )
                    try operations.addHandler(handler)
                    return HTTP2ClientConnection(
                        channel: channel,
                        handler: handler,
                        host: host,
                        port: port,
                        isTLS: tls != nil
                    )
                }
            }
    }

    /// Returns once the server's first SETTINGS are in (fails if the connection closes first or
    /// none come within the connection's `settingsTimeout`, 10 s unless given; the connection is
    /// then closed). Until then nghttp2 assumes the server allows 100 streams: a client
    /// that fans out many requests on a new connection to a gateway that allows one stream
    /// until the client authenticates waits here, so that the extra requests queue instead of
    /// being refused.
    public func waitForServerSettings() async throws {
        try await diagnosing { try await settingsReceived.get() }
    }

    /// Sends a request and returns the whole response.
    public func send(_ request: HTTPClientRequest) async throws -> HTTPClientResponse {
        try await diagnosing { try await submit(request).get() }
    }

    /// `body`'s result. A cleartext connection that the server closed without a byte is, as
    /// often as not, a TLS port given http://: a TLS server drops a cleartext preface without a
    /// word, so a second connection asks it with a ClientHello, and a TLS answer says so.
    private func diagnosing<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch HTTP2ClientError.closedWithoutAnswer where !isTLS {
            if await TLSProbe.answers(host: host, port: port, group: channel.eventLoop) {
                throw HTTP2ClientError.tlsPort(host: host, port: port)
            }
            throw HTTP2ClientError.closedWithoutAnswer
        }
    }

    /// Sends a request; the future completes with the whole response. For callers that keep
    /// many requests in flight from event-loop callbacks (the bench's load generator), where a
    /// task per request would cost more than the request itself.
    ///
    /// On the connection's loop the request is submitted at once, also from inside another
    /// request's callbacks (which run while nghttp2 is reading): nghttp2 queues it, and the
    /// connection sends it when the read is done.
    public func submit(_ request: HTTPClientRequest) -> EventLoopFuture<HTTPClientResponse> {
        let promise = channel.eventLoop.makePromise(of: HTTPClientResponse.self)
        onLoop { $0.send(request, promise: promise) }
        return promise.futureResult
    }

    /// Sends a request whose body goes to `onChunk`, called on the connection's event loop as
    /// each chunk arrives. A chunk counts as read (HTTP/2 flow control) as it is handed over, so
    /// `onChunk` should handle it before returning, not pass it to another thread. The future
    /// completes with the head; the head's `ended` completes with the body. Submitted at once on
    /// the connection's loop, like `submit`.
    public func submitStreaming(
        _ request: HTTPClientRequest,
        onChunk: @escaping @Sendable (ByteBuffer) -> Void
    ) -> EventLoopFuture<HTTPClientStreamedHead> {
        let promise = channel.eventLoop.makePromise(of: HTTPClientStreamedHead.self)
        let ended = channel.eventLoop.makePromise(of: Void.self)
        onLoop { $0.stream(request, promise: promise, ended: ended, onChunk: onChunk) }
        return promise.futureResult
    }

    /// Sends a request and returns as soon as the response head arrives; the body follows.
    public func stream(_ request: HTTPClientRequest) async throws -> HTTPClientStreamingResponse {
        let promise = channel.eventLoop.makePromise(of: HTTPClientStreamingResponse.self)
        onLoop { $0.stream(request, promise: promise) }
        return try await diagnosing { try await promise.futureResult.get() }
    }

    /// Runs `body` with the handler: now when already on the connection's loop, else on it.
    private func onLoop(_ body: @escaping @Sendable (HTTP2ClientHandler) -> Void) {
        let handler = self.handler
        if channel.eventLoop.inEventLoop {
            body(handler.value)
        } else {
            channel.eventLoop.execute { body(handler.value) }
        }
    }

    /// The server's current SETTINGS_MAX_CONCURRENT_STREAMS (gated connections start low).
    public func serverMaxConcurrentStreams() async throws -> UInt32 {
        let handler = self.handler
        return try await channel.eventLoop.submit { handler.value.serverMaxConcurrentStreams }.get()
    }

    /// Abandons a streamed response: the server sees RST_STREAM (CANCEL).
    public func reset(streamID: Int32) {
        let handler = self.handler
        channel.eventLoop.execute { handler.value.reset(streamID: streamID) }
    }

    /// Sends GOAWAY and closes.
    public func close() async {
        let handler = self.handler
        channel.eventLoop.execute { handler.value.closeGracefully() }
        try? await channel.closeFuture.get()
    }
}
