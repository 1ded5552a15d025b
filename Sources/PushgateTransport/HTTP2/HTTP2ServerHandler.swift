import CNGHTTP2
import Logging
import NIOCore
import NIOHTTP1

/// The server side of one HTTP/2 connection: an nghttp2 session fed from the channel, requests
/// dispatched to the application, responses written back, whole or streamed.
///
/// Back-pressure: frames are serialized only while the channel is writable, and no more bytes
/// are read from the peer while it is not; a peer that stops reading stops being served.
final class HTTP2ServerHandler: ChannelDuplexHandler, HTTPResponseSink, ConnectionControl {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// A request whose headers and body are still arriving.
    private final class PendingRequest {
        var method = ""
        var path = ""
        var authority: String?
        var scheme: String?
        /// Room for a typical request's fields up front: growing one by one costs an
        /// allocation per doubling.
        var headers: HTTPHeaders = {
            var headers = HTTPHeaders()
            headers.reserveCapacity(12)
            return headers
        }()
        var headerListSize = 0
        var body: ByteBuffer?
        var rejected = false
        let startedAt = NIODeadline.now()
    }

    private enum State {
        case active
        /// Shutdown notice and PING sent; the final GOAWAY follows the PING ack or a timeout.
        case quiescing
        /// Final GOAWAY sent; the connection closes when the last stream does.
        case goingAway
        case closed
    }

    private let shared: SharedHTTP2ServerConfiguration
    private var configuration: HTTP2ServerConfiguration { shared.configuration }
    private let application: any HTTPServerHandler
    private let connection: ConnectionInfo
    private let logger: ConnectionLogger
    private var session: NGHTTP2Session!
    private var output: HTTP2OutputFlusher?
    private var context: ChannelHandlerContext!
    private var state = State.active

    private var requests: [Int32: PendingRequest] = [:]
    /// The stream whose header block is being received: a block arrives in one piece (HEADERS +
    /// CONTINUATION), so this saves a dictionary lookup per header field.
    private var headerStreamID: Int32 = 0
    private var headerRequest: PendingRequest?
    private var writers: [Int32: ResponseBodyWriter] = [:]
    private var openStreams = 0

    private var readHeld = false
    /// Streams answered 413 while their body was still arriving: reset once the answer is out.
    private var rejectedStreams: Set<Int32> = []
    /// Request body bytes held across all streams of this connection.
    private var bufferedRequestBytes = 0

    /// Still limited to `streamsUntilAuthorized` streams.
    private var gated = false

    private var idleTimer: Scheduled<Void>?
    private var shutdownTimer: Scheduled<Void>?
    private var requestTimer: Scheduled<Void>?
    private var stallTimer: Scheduled<Void>?

    init(
        configuration: SharedHTTP2ServerConfiguration,
        application: any HTTPServerHandler,
        connection: ConnectionInfo,
        logger: Logger
    ) {
        self.shared = configuration
        self.application = application
        self.connection = connection
        self.logger = ConnectionLogger(base: logger, connection: connection)
    }

    // MARK: Channel events

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        do {
            gated = configuration.streamsUntilAuthorized != nil && connection.peerCertificate == nil
            session = try NGHTTP2Session(
                role: .server,
                limits: configuration.session,
                initialMaxConcurrentStreams: gated ? configuration.streamsUntilAuthorized : nil,
                sharingFrameBuffer: true,
                delegate: self
            )
        } catch {
            logger.error("cannot create HTTP/2 session", metadata: ["error": "\(error)"])
            state = .closed
            context.close(promise: nil)
            return
        }
        output = HTTP2OutputFlusher(
            session: session,
            context: context,
            chunkSize: configuration.outputChunkSize,
            closeTimeout: configuration.closeTimeout,
            delegate: self
        )
        connection.install(control: self)
        armIdleTimer()
        if context.channel.isActive { output?.flush() }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        connection.install(control: nil)
        tearDown()
        self.context = nil
    }

    func channelActive(context: ChannelHandlerContext) {
        output?.flush()
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        tearDown()
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard state != .closed, let output else { return }
        do {
            try output.receive(unwrapInboundIn(data))
        } catch {
            logger.debug("closing HTTP/2 connection on protocol error", metadata: ["error": "\(error)"])
            // For protocol errors nghttp2 has queued a GOAWAY; send whatever it has, then close.
            closeAfterFlush()
            return
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        // Most requests arrive whole in one read and are dispatched by now: only those still
        // arriving need the timer, so a busy connection does not schedule one per request.
        if !requests.isEmpty { armRequestTimer() }
        output?.flush()
        context.fireChannelReadComplete()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            stallTimer?.cancel()
            stallTimer = nil
            output?.flush()
            if readHeld {
                readHeld = false
                context.read()
            }
        } else if stallTimer == nil, state != .closed {
            let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
            let logger = self.logger
            stallTimer = context.eventLoop.scheduleTask(in: configuration.writeStallTimeout) {
                logger.debug("closing HTTP/2 connection: the peer has read nothing for too long")
                loopBound.value.close(promise: nil)
            }
        }
        context.fireChannelWritabilityChanged()
    }

    func read(context: ChannelHandlerContext) {
        // Reading more requests while responses cannot leave would only queue them here.
        if context.channel.isWritable {
            context.read()
        } else {
            readHeld = true
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is ChannelShouldQuiesceEvent {
            beginGracefulShutdown()
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        logger.debug("HTTP/2 connection error", metadata: ["error": "\(error)"])
        context.close(promise: nil)
    }

    /// Sends whatever nghttp2 still has queued (e.g. the GOAWAY for a protocol error), then
    /// closes. Never called from inside an nghttp2 callback.
    private func closeAfterFlush() {
        logger.trace("closing after flush", metadata: ["h2.open_streams": "\(openStreams)"])
        guard state != .closed, let output else { return }
        state = .closed
        output.closeAfterFlush()
    }

    private func tearDown() {
        output?.tearDown()
        for timer in [idleTimer, shutdownTimer, requestTimer, stallTimer] { timer?.cancel() }
        idleTimer = nil
        shutdownTimer = nil
        requestTimer = nil
        stallTimer = nil
        state = .closed
        let open = writers
        writers = [:]
        requests = [:]
        for writer in open.values { writer.streamClosed(.connectionClosed) }
    }

    // MARK: Idle timeout and graceful shutdown

    private func armIdleTimer() {
        guard let timeout = configuration.idleTimeout, let context, openStreams == 0, state == .active else { return }
        idleTimer?.cancel()
        let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
        idleTimer = context.eventLoop.scheduleTask(in: timeout) {
            loopBound.value.idleTimeoutFired()
        }
    }

    private func idleTimeoutFired() {
        guard state == .active, openStreams == 0 else { return }
        logger.debug("closing idle HTTP/2 connection")
        // With no stream open, nghttp2 is done once this GOAWAY is out; the flush then closes.
        sendGoAway(debugData: Self.idleTimeoutDebugData)
    }

    /// The connection's last GOAWAY (NO_ERROR, the last stream we process, APNs' reason JSON):
    /// no timer of the connection may fire after it. Sent by the next flush, which closes the
    /// connection once nghttp2 is done with its streams.
    private func sendGoAway(debugData: [UInt8]) {
        shutdownTimer?.cancel()
        shutdownTimer = nil
        idleTimer?.cancel()
        idleTimer = nil
        state = .goingAway
        session.submitGoAway(
            lastStreamID: session.lastProcessedStreamID,
            errorCode: NGHTTP2_NO_ERROR.rawValue,
            debugData: debugData
        )
        output?.scheduleFlush()
    }

    /// Shutdown notice, PING, then (on its ack) GOAWAY with the last stream we will process:
    /// the client learns early not to open streams and none already in flight is lost.
    private func beginGracefulShutdown() {
        logger.trace("graceful shutdown requested", metadata: ["h2.open_streams": "\(openStreams)"])
        guard state == .active, let context else { return }
        idleTimer?.cancel()
        if openStreams == 0 {
            sendGoAway(debugData: Self.shutdownDebugData)
            return
        }
        state = .quiescing
        session.submitShutdownNotice()
        session.submitPing()
        let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
        shutdownTimer = context.eventLoop.scheduleTask(in: configuration.shutdownNoticeTimeout) {
            loopBound.value.sendFinalGoAway()
        }
        for writer in writers.values { writer.shutdownRequested() }
        output?.scheduleFlush()
    }

    private func sendFinalGoAway() {
        guard state == .quiescing else { return }
        // Called from the PING-ack callback or a timer: the flush sends it.
        sendGoAway(debugData: Self.shutdownDebugData)
    }

    // MARK: Application requests (ConnectionControl)

    func grantFullConcurrency() {
        guard gated, state == .active, session != nil else { return }
        gated = false
        session.submitMaxConcurrentStreams(configuration.session.maxConcurrentStreams)
        output?.scheduleFlush()
    }

    func goAway(debugData: [UInt8]) {
        guard state == .active || state == .quiescing, session != nil else { return }
        logger.debug("closing HTTP/2 connection", metadata: ["h2.goaway_debug_data": "\(String(decoding: debugData, as: UTF8.self))"])
        sendGoAway(debugData: debugData)
    }

    /// APNs' GOAWAY debug data for the transport's own reasons.
    static let idleTimeoutDebugData = Array(#"{"reason":"IdleTimeout"}"#.utf8)
    static let shutdownDebugData = Array(#"{"reason":"Shutdown"}"#.utf8)

    // MARK: Responses (HTTPResponseSink)

    func sendResponse(_ response: HTTPServerResponse, streamID: Int32) {
        guard state != .closed, session.claimResponse(streamID: streamID) else { return }
        do {
            try session.submitResponse(
                streamID: streamID,
                status: response.head.status,
                headers: response.head.headers,
                body: response.body,
                streaming: false
            )
        } catch {
            logger.debug("response not sent", metadata: ["error": "\(error)", "h2.stream": "\(streamID)"])
            return
        }
        output?.scheduleFlush()
    }

    func startStreaming(_ head: ResponseHead, streamID: Int32, writer: ResponseBodyWriter) -> Bool {
        guard state != .closed, session.claimResponse(streamID: streamID) else { return false }
        do {
            try session.submitResponse(
                streamID: streamID,
                status: head.status,
                headers: head.headers,
                body: nil,
                streaming: true
            )
        } catch {
            return false
        }
        writers[streamID] = writer
        if state == .quiescing || state == .goingAway { writer.shutdownRequested() }
        output?.scheduleFlush()
        return true
    }

    func writeBody(_ buffer: ByteBuffer?, end: Bool, streamID: Int32) -> Bool {
        guard state != .closed, session.appendBody(streamID: streamID, buffer, end: end) else { return false }
        output?.scheduleFlush()
        return true
    }

    func bufferedBodyBytes(streamID: Int32) -> Int {
        session?.bufferedBodyBytes(streamID: streamID) ?? 0
    }

    var connectionBufferedBytes: Int {
        guard let context else { return 0 }
        return (try? context.channel.syncOptions?.getOption(.bufferedWritableBytes)) ?? 0
    }

    func cancelStream(streamID: Int32) {
        guard state != .closed else { return }
        session.resetStream(streamID, errorCode: NGHTTP2_CANCEL.rawValue)
        output?.scheduleFlush()
    }

    // MARK: Requests

    /// Resets requests that have been arriving for longer than `requestTimeout` (a peer that
    /// opens streams and never finishes them), then re-arms for the oldest remaining one.
    private func armRequestTimer() {
        guard requestTimer == nil, let context, let oldest = requests.values.lazy.map(\.startedAt).min() else { return }
        let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
        requestTimer = context.eventLoop.scheduleTask(deadline: oldest + configuration.requestTimeout) {
            loopBound.value.requestTimerFired()
        }
    }

    /// A device connection spends its life with its event stream open and no request arriving:
    /// a timer left armed would hold memory on each of them (and fire for nothing).
    private func disarmRequestTimerIfNoneArriving() {
        guard let timer = requestTimer, requests.isEmpty else { return }
        timer.cancel()
        requestTimer = nil
    }

    private func requestTimerFired() {
        requestTimer = nil
        guard state != .closed else { return }
        let cutoff = NIODeadline.now() - configuration.requestTimeout
        for (streamID, pending) in requests where pending.startedAt <= cutoff && !pending.rejected {
            logger.debug("resetting a request that did not arrive in time", metadata: ["h2.stream": "\(streamID)"])
            bufferedRequestBytes -= pending.body?.readableBytes ?? 0
            pending.body = nil
            pending.rejected = true
            session.resetStream(streamID, errorCode: NGHTTP2_CANCEL.rawValue)
        }
        armRequestTimer()
        output?.scheduleFlush()
    }

    private func dispatch(streamID: Int32) {
        guard let pending = requests.removeValue(forKey: streamID), !pending.rejected else { return }
        disarmRequestTimerIfNoneArriving()
        bufferedRequestBytes -= pending.body?.readableBytes ?? 0
        let request = HTTPServerRequest(
            method: pending.method,
            path: pending.path,
            authority: pending.authority,
            scheme: pending.scheme,
            headers: pending.headers,
            body: pending.body ?? ByteBuffer(),
            connection: connection
        )
        application.handle(request, responder: HTTPResponder(sink: self, streamID: streamID, eventLoop: context.eventLoop))
    }

    private func reject(_ pending: PendingRequest, streamID: Int32, status: Int, detail: String) {
        pending.rejected = true
        bufferedRequestBytes -= pending.body?.readableBytes ?? 0
        pending.body = nil
        rejectedStreams.insert(streamID)
        sendResponse(
            HTTPServerResponse(status: status, text: detail + "\n"),
            streamID: streamID
        )
    }
}

extension HTTP2ServerHandler: NGHTTP2SessionDelegate {
    private static let methodName = Array(":method".utf8)
    private static let pathName = Array(":path".utf8)
    private static let authorityName = Array(":authority".utf8)
    private static let schemeName = Array(":scheme".utf8)

    func sessionBeginHeaders(streamID: Int32, category: nghttp2_headers_category) -> Bool {
        guard category == NGHTTP2_HCAT_REQUEST else { return true }
        let pending = PendingRequest()
        requests[streamID] = pending
        headerStreamID = streamID
        headerRequest = pending
        openStreams += 1
        idleTimer?.cancel()
        idleTimer = nil
        return true
    }

    func sessionHeader(
        streamID: Int32,
        category: nghttp2_headers_category,
        name: UnsafeBufferPointer<UInt8>,
        value: UnsafeBufferPointer<UInt8>
    ) -> Bool {
        // Trailers are accepted by the protocol but carry nothing the gateway uses.
        guard category == NGHTTP2_HCAT_REQUEST else { return true }
        let pending: PendingRequest
        if streamID == headerStreamID, let current = headerRequest {
            pending = current
        } else if let found = requests[streamID] {
            pending = found
        } else {
            return true
        }
        pending.headerListSize += name.count + value.count + 32
        if pending.headerListSize > configuration.session.maxHeaderListSize { return false }
        if name.first == UInt8(ascii: ":") {
            let text = String(decoding: value, as: UTF8.self)
            if name.elementsEqual(Self.methodName) {
                pending.method = text
            } else if name.elementsEqual(Self.pathName) {
                pending.path = text
            } else if name.elementsEqual(Self.authorityName) {
                pending.authority = text
            } else if name.elementsEqual(Self.schemeName) {
                pending.scheme = text
            }
        } else {
            pending.headers.add(name: String(decoding: name, as: UTF8.self), value: String(decoding: value, as: UTF8.self))
        }
        return true
    }

    func sessionHeadersComplete(streamID: Int32, category: nghttp2_headers_category, endStream: Bool) {
        headerRequest = nil
        headerStreamID = 0
        if endStream { dispatch(streamID: streamID) }
    }

    func sessionData(streamID: Int32, bytes: UnsafeRawBufferPointer) -> Bool {
        guard let pending = requests[streamID], !pending.rejected else { return true }
        let size = (pending.body?.readableBytes ?? 0) + bytes.count
        if size > configuration.maxRequestBodySize {
            reject(
                pending,
                streamID: streamID,
                status: 413,
                detail: "request body larger than \(configuration.maxRequestBodySize) bytes"
            )
            return true
        }
        if bufferedRequestBytes + bytes.count > configuration.maxBufferedRequestBytes {
            logger.debug("refusing a stream: the connection holds too many request bytes", metadata: ["h2.stream": "\(streamID)"])
            bufferedRequestBytes -= pending.body?.readableBytes ?? 0
            pending.body = nil
            pending.rejected = true
            session.resetStream(streamID, errorCode: NGHTTP2_REFUSED_STREAM.rawValue)
            return true
        }
        bufferedRequestBytes += bytes.count
        if pending.body == nil {
            var body = context.channel.allocator.buffer(capacity: bytes.count)
            body.writeBytes(bytes)
            pending.body = body
        } else {
            pending.body!.writeBytes(bytes)
        }
        return true
    }

    func sessionDataEnded(streamID: Int32) {
        dispatch(streamID: streamID)
    }

    func sessionStreamClosed(streamID: Int32, errorCode: UInt32) {
        if let pending = requests.removeValue(forKey: streamID) {
            bufferedRequestBytes -= pending.body?.readableBytes ?? 0
            disarmRequestTimerIfNoneArriving()
        }
        rejectedStreams.remove(streamID)
        if let writer = writers.removeValue(forKey: streamID) {
            writer.streamClosed(errorCode == NGHTTP2_NO_ERROR.rawValue ? .finished : .reset(errorCode: errorCode))
        }
        openStreams = max(0, openStreams - 1)
        // In .goingAway the connection closes from the flush once nghttp2 reports the session
        // done; closing here, inside an nghttp2 callback, would cut off frames not yet written.
        if openStreams == 0, state == .active { armIdleTimer() }
    }

    func sessionGoAwayReceived(lastStreamID: Int32, errorCode: UInt32, debugData: UnsafeRawBufferPointer) {}

    func sessionPingAckReceived() {
        if state == .quiescing { sendFinalGoAway() }
    }

    func sessionSettingsReceived() {}

    func sessionBodyDrained(streamID: Int32, remaining: Int) {
        writers[streamID]?.bodyDrained(remaining: remaining)
    }

    /// A 413 went out while the request body was still arriving: RST_STREAM(NO_ERROR) tells the
    /// client to stop sending it (RFC 9113 section 8.1).
    func sessionEndStreamSent(streamID: Int32) {
        guard rejectedStreams.remove(streamID) != nil else { return }
        session.resetStream(streamID, errorCode: NGHTTP2_NO_ERROR.rawValue)
    }
}

extension HTTP2ServerHandler: HTTP2OutputFlusherDelegate {
    func outputClosing(after error: (any Error)?) {
        if let error {
            logger.debug("HTTP/2 send failed", metadata: ["error": "\(error)"])
        } else {
            logger.trace("HTTP/2 session finished")
        }
        state = .closed
    }
}

@available(*, unavailable)
extension HTTP2ServerHandler: Sendable {}
