import CNGHTTP2
import NIOCore
import NIOHTTP1
import PushgateTLS

/// The client side of one HTTP/2 connection on nghttp2: submits requests and assembles
/// responses, whole or streamed. Used by the agent, `send` and `bench` commands and the tests.
final class HTTP2ClientHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private enum Delivery {
        case whole(EventLoopPromise<HTTPClientResponse>)
        case streaming(EventLoopPromise<HTTPClientStreamingResponse>)
        /// Body chunks go to `onChunk` on the event loop, with no task or async sequence in
        /// between; `ended` completes when the body does.
        case callbacks(
            EventLoopPromise<HTTPClientStreamedHead>,
            onChunk: (ByteBuffer) -> Void,
            ended: EventLoopPromise<Void>
        )
    }

    private final class Stream {
        let delivery: Delivery
        var status = 0
        var headers = HTTPHeaders()
        var body: ByteBuffer?
        /// Where the body goes once a streamed response's head is out (the async sequence or the
        /// caller's callback); nil while the body is buffered for a whole response.
        var sink: BodySink?
        var done = false
        /// Body bytes handed to the application and not yet credited back to the server.
        var unconsumed = 0

        init(_ delivery: Delivery) { self.delivery = delivery }
    }

    private struct BodySink {
        let chunk: (ByteBuffer) -> Void
        let end: ((any Error)?) -> Void
    }

    /// Where the connection goes, for the errors that name it.
    private let host: String
    private let port: Int
    private let limits: HTTP2SessionLimits
    /// A whole (not streamed) response body larger than this fails the request.
    private let maxResponseBodySize: Int
    private var session: NGHTTP2Session!
    private var output: HTTP2OutputFlusher?
    private var context: ChannelHandlerContext?
    private var streams: [Int32: Stream] = [:]
    private var closed = false
    /// What the connection ended with, for a request made after the end.
    private var endError: any Error = HTTP2ClientError.connectionClosed
    /// The server has sent at least one byte (after TLS, when over TLS).
    private var answered = false
    /// The first error the pipeline reported before the close (a TLS handshake that failed, and
    /// why): what the requests still open fail with, rather than a bare "closed", which said
    /// nothing of an untrusted certificate or a cleartext port.
    private var closingError: (any Error)?
    private let goAway: EventLoopPromise<HTTP2GoAway>
    private var goAwayCompleted = false
    private let settings: EventLoopPromise<Void>
    private var settingsCompleted = false
    private var settingsTimer: Scheduled<Void>?
    /// How long the server gets to send its first SETTINGS.
    private let settingsTimeout: TimeAmount

    /// Completes with the first GOAWAY the server sends.
    var goAwayFuture: EventLoopFuture<HTTP2GoAway> { goAway.futureResult }
    /// Completes once the server's first SETTINGS are in: from then on, requests beyond its
    /// stream limit wait in nghttp2's queue instead of being sent and refused.
    var settingsFuture: EventLoopFuture<Void> { settings.futureResult }

    init(
        host: String,
        port: Int,
        limits: HTTP2SessionLimits,
        maxResponseBodySize: Int,
        settingsTimeout: TimeAmount,
        eventLoop: any EventLoop
    ) {
        self.host = host
        self.port = port
        self.limits = limits
        self.maxResponseBodySize = maxResponseBodySize
        self.settingsTimeout = settingsTimeout
        self.goAway = eventLoop.makePromise()
        self.settings = eventLoop.makePromise()
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        do {
            session = try NGHTTP2Session(role: .client, limits: limits, manualFlowControl: true, delegate: self)
        } catch {
            context.fireErrorCaught(error)
            context.close(promise: nil)
            return
        }
        output = HTTP2OutputFlusher(
            session: session,
            context: context,
            chunkSize: 64 * 1024,
            // As the server's default: a server that takes not even our last bytes is cut off.
            closeTimeout: .seconds(5),
            delegate: self
        )
        let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
        let timeout = settingsTimeout
        settingsTimer = context.eventLoop.scheduleTask(in: timeout) {
            loopBound.value.completeSettings(.failure(HTTP2ClientError.noSettings(within: timeout)))
        }
        if context.channel.isActive { output?.flush() }
    }

    func channelActive(context: ChannelHandlerContext) {
        output?.flush()
        context.fireChannelActive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if closingError == nil { closingError = error }
        context.fireErrorCaught(error)
    }

    func channelInactive(context: ChannelHandlerContext) {
        endEverything()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        endEverything()
        self.context = nil
    }

    /// The connection is gone: whatever still waits fails with why.
    private func endEverything() {
        output?.tearDown()
        let error = endingError
        failAll(error)
        completeGoAway(.failure(error))
        completeSettings(.failure(error))
    }

    /// Why the connection ended, in the words that say what to do. A server that closed or reset
    /// the connection without a byte is told apart from one that stopped later: whether the
    /// reset or the close came first is a matter of timing (a reset discards what arrived before
    /// it), the silence is not.
    private var endingError: any Error {
        switch closingError {
        case let error as TLSError:
            if case .notTLS(let answer) = error.kind {
                return HTTP2ClientError.cleartextPort(host: host, port: port, answer: answer)
            }
            return error
        case let error as HTTP2ClientError:
            return error
        case .some(let error) where answered:
            return error
        default:
            if !answered { return HTTP2ClientError.closedWithoutAnswer }
            return settingsCompleted ? HTTP2ClientError.connectionClosed : HTTP2ClientError.closedBeforeSettings
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !closed, let output else { return }
        let bytes = unwrapInboundIn(data)
        if !answered, bytes.readableBytes > 0 {
            answered = true
            if let error = notHTTP2(bytes) {
                closingError = error
                context.close(promise: nil)
                return
            }
        }
        do {
            try output.receive(bytes)
        } catch {
            context.fireErrorCaught(error)
            // For protocol errors nghttp2 has queued a GOAWAY; send whatever it has, then close.
            output.closeAfterFlush()
        }
    }

    /// The server's first bytes, when they cannot be HTTP/2: a TLS record (a TLS port spoken to in
    /// cleartext) or an HTTP/1 status line. nghttp2 would only call them a bad frame.
    private func notHTTP2(_ bytes: ByteBuffer) -> HTTP2ClientError? {
        let start = bytes.readableBytesView.prefix(3)
        // A TLS record: content type 20 to 23 (a handshake or an alert, here), version 3.x.
        if let type = start.first, (20...23).contains(type), start.dropFirst().first == 3 {
            return .tlsPort(host: host, port: port)
        }
        let head = bytes.readableBytesView.prefix(128)
        guard head.starts(with: "HTTP/1.".utf8) else { return nil }
        let line = head.prefix { $0 != UInt8(ascii: "\r") && $0 != UInt8(ascii: "\n") }
        return .http1Answer(host: host, port: port, statusLine: String(decoding: line, as: UTF8.self))
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        output?.flush()
        context.fireChannelReadComplete()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { output?.flush() }
        context.fireChannelWritabilityChanged()
    }

    // MARK: Requests

    func send(_ request: HTTPClientRequest, promise: EventLoopPromise<HTTPClientResponse>) {
        submit(request, delivery: .whole(promise))
    }

    func stream(_ request: HTTPClientRequest, promise: EventLoopPromise<HTTPClientStreamingResponse>) {
        submit(request, delivery: .streaming(promise))
    }

    func stream(
        _ request: HTTPClientRequest,
        promise: EventLoopPromise<HTTPClientStreamedHead>,
        ended: EventLoopPromise<Void>,
        onChunk: @escaping (ByteBuffer) -> Void
    ) {
        submit(request, delivery: .callbacks(promise, onChunk: onChunk, ended: ended))
    }

    private func submit(_ request: HTTPClientRequest, delivery: Delivery) {
        guard !closed, session != nil else {
            fail(delivery, endError)
            return
        }
        var fields = HTTPHeaders()
        fields.reserveCapacity(request.headers.count + 4)
        fields.add(name: ":method", value: request.method)
        fields.add(name: ":scheme", value: request.scheme)
        fields.add(name: ":authority", value: request.authority ?? "localhost")
        fields.add(name: ":path", value: request.path)
        for (name, value) in request.headers { fields.add(name: name, value: value) }
        do {
            let streamID = try session.submitRequest(headers: fields, body: request.body)
            streams[streamID] = Stream(delivery)
        } catch {
            fail(delivery, HTTP2ClientError.submitFailed("\(error)"))
            return
        }
        output?.scheduleFlush()
    }

    /// The application has processed `count` body bytes of `streamID`: let the server send more.
    /// Bytes of a stream that is gone were already credited when it went.
    func consumed(streamID: Int32, count: Int) {
        guard !closed, session != nil, let stream = streams[streamID] else { return }
        stream.unconsumed -= count
        session.consume(streamID: streamID, count: count)
        output?.scheduleFlush()
    }

    /// Credits what the application will now never read, so the connection window does not
    /// shrink for good.
    private func creditUnconsumed(_ stream: Stream, streamID: Int32) {
        guard stream.unconsumed > 0, session != nil else { return }
        session.consume(streamID: streamID, count: stream.unconsumed)
        stream.unconsumed = 0
    }

    var serverMaxConcurrentStreams: UInt32 { session?.remoteMaxConcurrentStreams ?? 0 }

    /// Resets a stream (RST_STREAM CANCEL): the response is abandoned.
    func reset(streamID: Int32) {
        guard !closed, session != nil, let stream = streams.removeValue(forKey: streamID) else { return }
        session.resetStream(streamID, errorCode: NGHTTP2_CANCEL.rawValue)
        creditUnconsumed(stream, streamID: streamID)
        if !stream.done { finish(stream, error: HTTP2ClientError.streamReset(errorCode: NGHTTP2_CANCEL.rawValue)) }
        output?.scheduleFlush()
    }

    func closeGracefully() {
        guard !closed, let context else { return }
        // Closed here, not by the server: what still waits fails as closed, whatever was heard.
        if closingError == nil { closingError = HTTP2ClientError.connectionClosed }
        session.submitGoAway(lastStreamID: 0, errorCode: NGHTTP2_NO_ERROR.rawValue)
        output?.flush()
        context.close(promise: nil)
    }

    private func completeGoAway(_ result: Result<HTTP2GoAway, any Error>) {
        guard !goAwayCompleted else { return }
        goAwayCompleted = true
        goAway.completeWith(result)
    }

    private func fail(_ delivery: Delivery, _ error: any Error) {
        switch delivery {
        case .whole(let promise): promise.fail(error)
        case .streaming(let promise): promise.fail(error)
        case .callbacks(let promise, _, let ended):
            promise.fail(error)
            ended.fail(error)
        }
    }

    private func failAll(_ error: any Error) {
        if !closed { endError = error }
        closed = true
        let open = streams
        streams = [:]
        for stream in open.values where !stream.done {
            finish(stream, error: error)
        }
    }

    private func finish(_ stream: Stream, error: (any Error)?) {
        stream.done = true
        if let sink = stream.sink {
            stream.sink = nil
            sink.end(error)
            return
        }
        switch (stream.delivery, error) {
        case (_, let error?):
            fail(stream.delivery, error)
        case (.whole(let promise), nil):
            promise.succeed(
                HTTPClientResponse(status: stream.status, headers: stream.headers, body: stream.body ?? ByteBuffer())
            )
        case (.streaming, nil), (.callbacks, nil):
            // Ended with only an informational (1xx) head.
            fail(stream.delivery, HTTP2ClientError.noFinalResponse)
        }
    }

    private func headReceived(_ stream: Stream, streamID: Int32) {
        guard stream.sink == nil, let context else { return }
        switch stream.delivery {
        case .whole:
            return
        case .streaming(let promise):
            let (chunks, continuation) = AsyncThrowingStream<ByteBuffer, any Error>.makeStream()
            stream.sink = BodySink(
                // Credited when the application reads it (`consumed`).
                chunk: { [weak stream] chunk in
                    stream?.unconsumed += chunk.readableBytes
                    continuation.yield(chunk)
                },
                end: { error in if let error { continuation.finish(throwing: error) } else { continuation.finish() } }
            )
            let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
            let eventLoop = context.eventLoop
            let body = HTTPClientResponseBody(
                chunks: chunks,
                consumed: { count in eventLoop.execute { loopBound.value.consumed(streamID: streamID, count: count) } },
                // A consumer that stops iterating early abandons the stream: reset it so the
                // server stops sending, and credit what was never read.
                abandoned: { eventLoop.execute { loopBound.value.reset(streamID: streamID) } }
            )
            promise.succeed(
                HTTPClientStreamingResponse(
                    streamID: streamID,
                    status: stream.status,
                    headers: stream.headers,
                    body: body
                )
            )
        case .callbacks(let promise, let onChunk, let ended):
            stream.sink = BodySink(
                // Handled by the time the callback returns: credited at once.
                chunk: { [unowned self] chunk in
                    self.session.consume(streamID: streamID, count: chunk.readableBytes)
                    onChunk(chunk)
                },
                end: { error in if let error { ended.fail(error) } else { ended.succeed() } }
            )
            promise.succeed(
                HTTPClientStreamedHead(
                    streamID: streamID,
                    status: stream.status,
                    headers: stream.headers,
                    ended: ended.futureResult
                )
            )
        }
    }
}

extension HTTP2ClientHandler: NGHTTP2SessionDelegate {
    func sessionBeginHeaders(streamID: Int32, category: nghttp2_headers_category) -> Bool { true }

    func sessionHeader(
        streamID: Int32,
        category: nghttp2_headers_category,
        name: UnsafeBufferPointer<UInt8>,
        value: UnsafeBufferPointer<UInt8>
    ) -> Bool {
        guard category == NGHTTP2_HCAT_RESPONSE, let stream = streams[streamID] else { return true }
        if name.first == UInt8(ascii: ":") {
            if name.elementsEqual(":status".utf8) { stream.status = Int(String(decoding: value, as: UTF8.self)) ?? 0 }
        } else {
            stream.headers.add(
                name: String(decoding: name, as: UTF8.self),
                value: String(decoding: value, as: UTF8.self)
            )
        }
        return true
    }

    func sessionHeadersComplete(streamID: Int32, category: nghttp2_headers_category, endStream: Bool) {
        guard let stream = streams[streamID] else { return }
        // An informational (1xx) head is followed by the real one.
        if category == NGHTTP2_HCAT_RESPONSE, stream.status >= 200 { headReceived(stream, streamID: streamID) }
        if endStream { finish(stream, error: nil) }
    }

    func sessionData(streamID: Int32, bytes: UnsafeRawBufferPointer) -> Bool {
        guard let stream = streams[streamID], let context else {
            session.consume(streamID: streamID, count: bytes.count)
            return true
        }
        if let sink = stream.sink {
            var chunk = context.channel.allocator.buffer(capacity: bytes.count)
            chunk.writeBytes(bytes)
            sink.chunk(chunk)
        } else {
            session.consume(streamID: streamID, count: bytes.count)
            if (stream.body?.readableBytes ?? 0) + bytes.count > maxResponseBodySize {
                session.resetStream(streamID, errorCode: NGHTTP2_CANCEL.rawValue)
                streams[streamID] = nil
                finish(stream, error: HTTP2ClientError.responseTooLarge(limit: maxResponseBodySize))
                return true
            }
            if stream.body == nil { stream.body = context.channel.allocator.buffer(capacity: bytes.count) }
            stream.body!.writeBytes(bytes)
        }
        return true
    }

    func sessionDataFrame(streamID: Int32, endStream: Bool) {
        guard endStream, let stream = streams[streamID] else { return }
        finish(stream, error: nil)
    }

    func sessionStreamClosed(streamID: Int32, errorCode: UInt32) {
        guard let stream = streams.removeValue(forKey: streamID) else { return }
        creditUnconsumed(stream, streamID: streamID)
        guard !stream.done else { return }
        let error: HTTP2ClientError
        if errorCode == NGHTTP2_REFUSED_STREAM.rawValue {
            error = .refused
        } else if errorCode == NGHTTP2_NO_ERROR.rawValue {
            error = .connectionClosed
        } else {
            error = .streamReset(errorCode: errorCode)
        }
        finish(stream, error: error)
    }

    func sessionGoAwayReceived(lastStreamID: Int32, errorCode: UInt32, debugData: UnsafeRawBufferPointer) {
        completeGoAway(
            .success(
                HTTP2GoAway(
                    lastStreamID: lastStreamID,
                    errorCode: errorCode,
                    debugData: String(decoding: debugData, as: UTF8.self)
                )
            )
        )
    }

    func sessionSettingsReceived() {
        completeSettings(.success(()))
    }

    private func completeSettings(_ result: Result<Void, any Error>) {
        guard !settingsCompleted else { return }
        settingsCompleted = true
        settingsTimer?.cancel()
        settingsTimer = nil
        settings.completeWith(result)
        if case .failure(let error) = result, let context, !closed {
            if closingError == nil { closingError = error }
            context.close(promise: nil)
        }
    }

    func sessionBodyDrained(streamID: Int32, remaining: Int) {}

    func sessionEndStreamSent(streamID: Int32) {}
    func sessionGoAwaySent(errorCode: UInt32) {}
    func sessionWastedFrame() -> Bool { true }
}

extension HTTP2ClientHandler: HTTP2OutputFlusherDelegate {
    func outputClosing(after error: (any Error)?) {
        if let error { context?.fireErrorCaught(error) }
        // Nothing more will be sent: a request made from now on fails at once rather than
        // waiting for the channel to go.
        failAll(
            error ?? (settingsCompleted ? HTTP2ClientError.connectionClosed : HTTP2ClientError.closedBeforeSettings)
        )
    }
}

@available(*, unavailable)
extension HTTP2ClientHandler: Sendable {}
