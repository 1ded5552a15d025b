import Logging
import NIOCore
import NIOHTTP1

/// Serves the application over HTTP/1.1 (for operators: Prometheus, curl without flags).
///
/// Sits behind NIO's HTTP/1 pipeline, which parses, serializes, and orders pipelined requests so
/// that exactly one is answered at a time. A response is whole, or streamed in chunks (the admin
/// event stream, which browsers read over HTTP/1.1); while one streams, later requests wait.
final class HTTP1ServerHandler: ChannelInboundHandler, HTTPResponseSink {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let application: any HTTPServerHandler
    private let connection: ConnectionInfo
    private let maxBodySize: Int
    private let bodyBudget: RequestBodyBudget
    private let idleTimeout: TimeAmount
    private let unauthenticatedIdleTimeout: TimeAmount?
    private let requestTimeout: TimeAmount
    /// Where its timeouts are counted.
    private let statistics: ConnectionStatistics
    private let logger: Logger
    private var context: ChannelHandlerContext!

    private var head: HTTPRequestHead?
    /// The request being answered is a HEAD (requests are answered one at a time, in order).
    private var answeringHEAD = false
    private var body: ByteBuffer?
    /// What the application admitted the request's body with, within `maxBodySize`.
    private var bodyLimit = 0
    private var rejected = false
    /// Identifies the request being answered so a late response to an earlier one is ignored.
    private var requestID: Int32 = 0
    private var answered = true
    private var keepAlive = true
    /// The connection closes after the current response; nothing more is dispatched.
    private var closing = false
    private var idleTimer: Scheduled<Void>?
    /// Runs from a request's head to its end: a body that trickles in (slowloris) is cut off.
    private var requestTimer: Scheduled<Void>?
    /// The body being streamed, if any.
    private var streaming: ResponseBodyWriter?

    init(
        application: any HTTPServerHandler,
        connection: ConnectionInfo,
        maxBodySize: Int,
        bodyBudget: RequestBodyBudget,
        idleTimeout: TimeAmount,
        unauthenticatedIdleTimeout: TimeAmount?,
        requestTimeout: TimeAmount,
        statistics: ConnectionStatistics,
        logger: Logger
    ) {
        self.application = application
        self.connection = connection
        self.maxBodySize = maxBodySize
        self.bodyBudget = bodyBudget
        self.idleTimeout = idleTimeout
        self.unauthenticatedIdleTimeout = unauthenticatedIdleTimeout
        self.requestTimeout = requestTimeout
        self.statistics = statistics
        self.logger = logger
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        armIdleTimer()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        idleTimer?.cancel()
        requestTimer?.cancel()
        endStream(.connectionClosed)
        _ = takeBody()
        self.context = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        endStream(.connectionClosed)
        context.fireChannelInactive()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable, let streaming {
            streaming.bodyDrained(remaining: connectionBufferedBytes)
        }
        context.fireChannelWritabilityChanged()
    }

    /// A graceful shutdown began (`HTTP1QuiesceObserver`): a streamed body is asked to end, so
    /// that NIO's pipeline handler can close the connection after it.
    func shutdownRequested() {
        streaming?.shutdownRequested()
    }

    private func endStream(_ reason: ResponseBodyWriter.CloseReason) {
        guard let writer = streaming else { return }
        streaming = nil
        writer.streamClosed(reason)
    }

    /// Parse errors were already answered `400` by `HTTP1MalformedRequestHandler`; any error ends
    /// the connection, since the byte stream can no longer be trusted.
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        logger.debug("closing HTTP/1.1 connection on error", metadata: ["error": "\(error)"])
        context.close(promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        armIdleTimer()
        guard !closing else { return }
        switch unwrapInboundIn(data) {
        case .head(let requestHead):
            armRequestTimer(context)
            head = requestHead
            answeringHEAD = requestHead.method == .HEAD
            rejected = false
            requestID &+= 1
            answered = false
            // After CONNECT or an Upgrade request NIO's parser stops parsing and would buffer
            // every later byte: answer, then close.
            keepAlive =
                requestHead.isKeepAlive && requestHead.method != .CONNECT
                && !requestHead.headers.contains(name: "upgrade")
            switch application.admit(request(requestHead, body: ByteBuffer()), responder: responder(context)) {
            case .readBody(let limit): bodyLimit = min(limit, maxBodySize)
            // What is left of the body is read and dropped: NIO's pipeline handler waits for
            // the request's end before the next request.
            case .answered: rejected = true
            }
        case .body(var chunk):
            guard !rejected, let requestHead = head else { return }
            if (body?.readableBytes ?? 0) + chunk.readableBytes > bodyLimit {
                refuse(requestHead, .bodyTooLarge(limit: bodyLimit), context: context)
            } else if !bodyBudget.take(chunk.readableBytes, authenticated: connection.isAuthenticated) {
                refuse(requestHead, .bodyBudgetExhausted, context: context)
            } else if body == nil {
                body = chunk
            } else {
                body!.writeBuffer(&chunk)
            }
        case .end:
            requestTimer?.cancel()
            requestTimer = nil
            guard let requestHead = head else { return }
            head = nil
            guard !rejected else { return }
            application.handle(request(requestHead, body: takeBody() ?? ByteBuffer()), responder: responder(context))
        }
    }

    /// A body refused while it arrives: answered at once, and the connection closes after the
    /// answer rather than read the rest.
    private func refuse(_ requestHead: HTTPRequestHead, _ refusal: TransportRefusal, context: ChannelHandlerContext) {
        rejected = true
        _ = takeBody()
        keepAlive = false
        application.refuse(request(requestHead, body: ByteBuffer()), refusal, responder: responder(context))
    }

    /// Takes the body away, for the application or to drop it: the budget no longer holds it.
    private func takeBody() -> ByteBuffer? {
        guard let taken = body else { return nil }
        body = nil
        bodyBudget.release(taken.readableBytes)
        return taken
    }

    private func request(_ requestHead: HTTPRequestHead, body: ByteBuffer) -> HTTPServerRequest {
        var headers = requestHead.headers
        let host = headers.first(name: "host")
        headers.remove(name: "host")
        let absolute = AbsoluteFormTarget.split(requestHead.uri)
        return HTTPServerRequest(
            method: requestHead.method.rawValue,
            path: absolute?.path ?? requestHead.uri,
            authority: absolute?.authority ?? host,
            scheme: connection.isTLS ? "https" : "http",
            headers: headers,
            body: body,
            connection: connection
        )
    }

    private func responder(_ context: ChannelHandlerContext) -> HTTPResponder {
        HTTPResponder(sink: self, streamID: requestID, eventLoop: context.eventLoop)
    }

    /// Closes a connection that has sent nothing for `idleTimeout` (`unauthenticatedIdleTimeout`
    /// until the application vouches for the peer), including one stalled in the middle of a
    /// request's head.
    private func armIdleTimer() {
        idleTimer?.cancel()
        // A streamed response may be quiet for long (the client only listens); it ends with
        // its connection, or when the application ends it.
        guard let context, streaming == nil else { return }
        var timeout = idleTimeout
        if !connection.isAuthenticated, let shorter = unauthenticatedIdleTimeout { timeout = min(timeout, shorter) }
        let loopBound = NIOLoopBound((context, self), eventLoop: context.eventLoop)
        idleTimer = context.eventLoop.scheduleTask(in: timeout) {
            let (context, handler) = loopBound.value
            handler.statistics.count(.idle)
            context.close(promise: nil)
        }
    }

    /// A request whose body has not ended `requestTimeout` after its head closes the connection:
    /// each chunk restarts the idle timer, so without this a body sent a byte at a time would
    /// hold the connection (and the body budget) indefinitely.
    private func armRequestTimer(_ context: ChannelHandlerContext) {
        requestTimer?.cancel()
        let loopBound = NIOLoopBound((context, self), eventLoop: context.eventLoop)
        requestTimer = context.eventLoop.scheduleTask(in: requestTimeout) {
            let (context, handler) = loopBound.value
            handler.requestTimer = nil
            handler.logger.debug("closing HTTP/1.1 connection: its request did not arrive in time")
            handler.statistics.count(.request)
            context.close(promise: nil)
        }
    }

    // MARK: HTTPResponseSink

    func sendResponse(_ response: HTTPServerResponse, streamID: Int32) {
        guard let context, streamID == requestID, !answered else { return }
        answered = true
        var headers = response.head.headers
        headers.replaceOrAdd(name: "content-length", value: String(response.body?.readableBytes ?? 0))
        if !keepAlive { headers.replaceOrAdd(name: "connection", value: "close") }
        let head = NIOHTTP1.HTTPResponseHead(
            version: .http1_1,
            status: HTTPResponseStatus(statusCode: response.head.status),
            headers: headers
        )
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        // A HEAD answer is its head alone (its content-length says what GET would send).
        if !answeringHEAD, let body = response.body, body.readableBytes > 0 {
            context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
        }
        if keepAlive {
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        } else {
            closing = true
            let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
            context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in
                loopBound.value.close(promise: nil)
            }
        }
    }

    /// Without a content-length, NIO's encoder sends the body chunked.
    func startStreaming(_ head: ResponseHead, streamID: Int32, writer: ResponseBodyWriter) -> Bool {
        guard let context, streamID == requestID, !answered else { return false }
        answered = true
        streaming = writer
        idleTimer?.cancel()
        idleTimer = nil
        var headers = head.headers
        headers.remove(name: "content-length")
        if !keepAlive { headers.replaceOrAdd(name: "connection", value: "close") }
        let responseHead = NIOHTTP1.HTTPResponseHead(
            version: .http1_1,
            status: HTTPResponseStatus(statusCode: head.status),
            headers: headers
        )
        context.writeAndFlush(wrapOutboundOut(.head(responseHead)), promise: nil)
        return true
    }

    func writeBody(_ buffer: ByteBuffer?, end: Bool, streamID: Int32) -> Bool {
        guard let context, streamID == requestID, let writer = streaming else { return false }
        if let buffer, buffer.readableBytes > 0 {
            context.write(wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
        }
        guard end else {
            context.flush()
            return true
        }
        streaming = nil
        let loopBound = NIOLoopBound((context, self), eventLoop: context.eventLoop)
        let keepAlive = self.keepAlive
        if !keepAlive { closing = true }
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { result in
            let (context, handler) = loopBound.value
            if case .success = result {
                writer.streamClosed(.finished)
            } else {
                writer.streamClosed(.connectionClosed)
            }
            if keepAlive {
                handler.armIdleTimer()
            } else {
                context.close(promise: nil)
            }
        }
        return true
    }

    func bufferedBodyBytes(streamID: Int32) -> Int {
        streamID == requestID && streaming != nil ? connectionBufferedBytes : 0
    }

    var connectionBufferedBytes: Int {
        guard let context else { return 0 }
        return (try? context.channel.syncOptions?.getOption(.bufferedWritableBytes)) ?? 0
    }

    /// HTTP/1.1 cannot end a response early but by closing its connection.
    func cancelStream(streamID: Int32) {
        guard let context, streamID == requestID, streaming != nil else { return }
        context.close(promise: nil)
    }
}

/// Tells the HTTP/1.1 handler of a graceful shutdown. NIO's pipeline handler, which comes after
/// this one, takes the event (it closes once the response in flight has ended) and passes
/// nothing on, so a streamed response would otherwise run until the shutdown deadline.
final class HTTP1QuiesceObserver: ChannelInboundHandler {
    typealias InboundIn = NIOAny

    private let handler: HTTP1ServerHandler

    init(_ handler: HTTP1ServerHandler) {
        self.handler = handler
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is ChannelShouldQuiesceEvent { handler.shutdownRequested() }
        context.fireUserInboundEventTriggered(event)
    }
}

@available(*, unavailable)
extension HTTP1QuiesceObserver: Sendable {}

@available(*, unavailable)
extension HTTP1ServerHandler: Sendable {}
