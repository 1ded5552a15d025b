import Logging
import NIOCore
import NIOHTTP1

/// Serves the application over HTTP/1.1 (for operators: Prometheus, curl without flags).
///
/// Sits behind NIO's HTTP/1 pipeline, which parses, serializes, and orders pipelined requests so
/// that exactly one is answered at a time.
final class HTTP1ServerHandler: ChannelInboundHandler, HTTPResponseSink {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let application: any HTTPServerHandler
    private let connection: ConnectionInfo
    private let maxBodySize: Int
    private let logger: Logger
    private var context: ChannelHandlerContext!

    private var head: HTTPRequestHead?
    private var body: ByteBuffer?
    private var rejected = false
    /// Identifies the request being answered so a late response to an earlier one is ignored.
    private var requestID: Int32 = 0
    private var answered = true
    private var keepAlive = true
    private var writer: ResponseBodyWriter?

    init(application: any HTTPServerHandler, connection: ConnectionInfo, maxBodySize: Int, logger: Logger) {
        self.application = application
        self.connection = connection
        self.maxBodySize = maxBodySize
        self.logger = logger
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        closeWriter(.connectionClosed)
        self.context = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        closeWriter(.connectionClosed)
        context.fireChannelInactive()
    }

    /// Parse errors were already answered `400` by NIO's protocol error handler; any error ends
    /// the connection, since the byte stream can no longer be trusted.
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        logger.debug("closing HTTP/1.1 connection on error", metadata: ["error": "\(error)"])
        context.close(promise: nil)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { writer?.bodyDrained(remaining: 0) }
        context.fireChannelWritabilityChanged()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let requestHead):
            head = requestHead
            body = nil
            rejected = false
        case .body(var chunk):
            guard !rejected else { return }
            if (body?.readableBytes ?? 0) + chunk.readableBytes > maxBodySize {
                rejected = true
                body = nil
                requestID &+= 1
                answered = false
                keepAlive = false
                sendResponse(
                    HTTPServerResponse(status: 413, text: "request body larger than \(maxBodySize) bytes\n"),
                    streamID: requestID
                )
                return
            }
            if body == nil { body = chunk } else { body!.writeBuffer(&chunk) }
        case .end:
            guard let requestHead = head, !rejected else { return }
            head = nil
            requestID &+= 1
            answered = false
            keepAlive = requestHead.isKeepAlive
            var headers = requestHead.headers
            let authority = headers.first(name: "host")
            headers.remove(name: "host")
            let request = HTTPServerRequest(
                method: requestHead.method.rawValue,
                path: requestHead.uri,
                authority: authority,
                scheme: connection.isTLS ? "https" : "http",
                headers: headers,
                body: body ?? ByteBuffer(),
                connection: connection
            )
            body = nil
            application.handle(request, responder: HTTPResponder(sink: self, streamID: requestID, eventLoop: context.eventLoop))
        }
    }

    // MARK: HTTPResponseSink

    func sendResponse(_ response: HTTPServerResponse, streamID: Int32) {
        guard let context, streamID == requestID, !answered else { return }
        answered = true
        var headers = response.head.headers
        headers.replaceOrAdd(name: "content-length", value: String(response.body?.readableBytes ?? 0))
        if !keepAlive { headers.replaceOrAdd(name: "connection", value: "close") }
        context.write(wrapOutboundOut(.head(responseHead(response.head.status, headers))), promise: nil)
        if let body = response.body, body.readableBytes > 0 {
            context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
        }
        finishResponse(context: context)
    }

    func startStreaming(_ head: ResponseHead, streamID: Int32, writer: ResponseBodyWriter) -> Bool {
        guard let context, streamID == requestID, !answered else { return false }
        answered = true
        self.writer = writer
        var headers = head.headers
        headers.remove(name: "content-length")
        context.writeAndFlush(wrapOutboundOut(.head(responseHead(head.status, headers))), promise: nil)
        return true
    }

    func writeBody(_ buffer: ByteBuffer?, end: Bool, streamID: Int32) -> Bool {
        guard let context, streamID == requestID, writer != nil else { return false }
        if let buffer, buffer.readableBytes > 0 {
            context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
        }
        if end {
            finishResponse(context: context)
            closeWriter(.finished)
        }
        return true
    }

    func bufferedBodyBytes(streamID: Int32) -> Int {
        // NIO's channel buffer holds what is not yet written; writability tells whether it is over
        // its high watermark.
        guard let context, let writer else { return 0 }
        return context.channel.isWritable ? 0 : writer.highWatermark
    }

    var connectionBufferedBytes: Int {
        guard let context else { return 0 }
        return (try? context.channel.syncOptions?.getOption(.bufferedWritableBytes)) ?? 0
    }

    func cancelStream(streamID: Int32) {
        guard let context, streamID == requestID else { return }
        closeWriter(.reset(errorCode: 0))
        context.close(promise: nil)
    }

    private func responseHead(_ status: Int, _ headers: HTTPHeaders) -> NIOHTTP1.HTTPResponseHead {
        NIOHTTP1.HTTPResponseHead(version: .http1_1, status: HTTPResponseStatus(statusCode: status), headers: headers)
    }

    private func finishResponse(context: ChannelHandlerContext) {
        if keepAlive {
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        } else {
            let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
            context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in
                loopBound.value.close(promise: nil)
            }
        }
    }

    private func closeWriter(_ reason: ResponseBodyWriter.CloseReason) {
        let current = writer
        writer = nil
        current?.streamClosed(reason)
    }
}

@available(*, unavailable)
extension HTTP1ServerHandler: Sendable {}
