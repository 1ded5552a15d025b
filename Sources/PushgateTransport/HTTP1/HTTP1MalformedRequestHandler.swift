import NIOCore
import NIOHTTP1

/// Answers bytes that do not parse as an HTTP/1.1 request with the application's `400` (its
/// error format, with a body saying what was wrong; `431` for too many header bytes), as NIO's
/// `HTTPServerProtocolErrorHandler` does with an empty one, and only when no response has
/// begun. The decoder closes the connection right after: the byte stream can no longer be
/// trusted.
final class HTTP1MalformedRequestHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    /// NIO's `HTTPDecoder` limit on a request's header bytes, past which it reports
    /// `headerOverflow`.
    static let maxHeaderBytes = 80 * 1024

    private let application: any HTTPServerHandler
    private var responseUnfinished = false

    init(application: any HTTPServerHandler) {
        self.application = application
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard let parseError = error as? HTTPParserError else {
            context.fireErrorCaught(error)
            return
        }
        if !responseUnfinished {
            // Written now: the decoder closes the channel once this returns.
            let response = application.headlessRefusal(
                parseError == .headerOverflow
                    ? .headerListTooLarge(limit: Self.maxHeaderBytes)
                    : .malformed(
                        detail:
                            "the bytes received are not an HTTP/1.1 request (\(parseError)); the connection is closed"
                    )
            )
            var headers = response.head.headers
            headers.replaceOrAdd(name: "connection", value: "close")
            headers.replaceOrAdd(name: "content-length", value: String(response.body?.readableBytes ?? 0))
            let status = HTTPResponseStatus(statusCode: response.head.status)
            context.write(
                wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers))),
                promise: nil
            )
            if let body = response.body { context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil) }
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        }
        context.fireErrorCaught(error)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        // An informational head (1xx) is followed by the real one.
        case .head(let head) where (100..<200).contains(head.status.code) && head.status.code != 101: break
        case .head: responseUnfinished = true
        case .body: break
        case .end: responseUnfinished = false
        }
        context.write(data, promise: promise)
    }
}
