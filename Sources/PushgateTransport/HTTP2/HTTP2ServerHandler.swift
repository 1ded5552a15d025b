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

    private let shared: SharedHTTP2ServerConfiguration
    // Not private: the session's callbacks (HTTP2ServerHandler+Session.swift) use them.
    var configuration: HTTP2ServerConfiguration { shared.configuration }
    let application: any HTTPServerHandler
    let connection: ConnectionInfo
    /// Shared with every connection of the server: what request bodies may hold in all.
    let bodyBudget: RequestBodyBudget
    let logger: ConnectionLogger
    private(set) var session: NGHTTP2Session!
    private(set) var output: HTTP2OutputFlusher?
    private(set) var context: ChannelHandlerContext!
    var policy: HTTP2ConnectionPolicy

    var requests: [Int32: PendingRequest] = [:]
    /// The stream whose header block is being received: a block arrives in one piece (HEADERS +
    /// CONTINUATION), so this saves a dictionary lookup per header field.
    var headerStreamID: Int32 = 0
    var headerRequest: PendingRequest?
    var writers: [Int32: ResponseBodyWriter] = [:]
    /// Streams whose request is a HEAD, until answered or closed.
    var headStreams: Set<Int32> = []

    private var readHeld = false
    /// The streams still open have been taken off `pushgate_http2_streams` (at the teardown).
    private var streamsUncounted = false
    /// Streams answered while their body was still arriving (a refusal on the head, a 413), by
    /// whether the answer is out yet. See `sessionDataFrame(streamID:endStream:)`.
    var earlyAnswers: [Int32: EarlyAnswer] = [:]
    /// Request body bytes held across all streams of this connection.
    var bufferedRequestBytes = 0
    var floodLimit: HTTP2FrameFloodLimit
    private let idleTimeouts: (idle: TimeAmount?, unauthenticated: TimeAmount?)
    /// The session failed because the peer sent more frames that do nothing than `floodLimit` lets.
    var floodLimitExceeded = false
    /// nghttp2 ended the session for its rapid-reset limit (counted once).
    var rapidResetClosure = false

    private var idleTimer: Scheduled<Void>?
    private var finishTimer: Scheduled<Void>?
    /// The application's GOAWAY debug data, kept while its GOAWAY waits for the open streams.
    private var goAwayDebugData: [UInt8] = []
    private var stallTimer: Scheduled<Void>?
    var requestTimer: Scheduled<Void>?

    init(
        configuration: SharedHTTP2ServerConfiguration,
        application: any HTTPServerHandler,
        connection: ConnectionInfo,
        bodyBudget: RequestBodyBudget,
        logger: Logger
    ) {
        self.shared = configuration
        self.application = application
        self.connection = connection
        self.bodyBudget = bodyBudget
        self.logger = ConnectionLogger(base: logger, connection: connection)
        self.policy = HTTP2ConnectionPolicy(
            gated: configuration.configuration.streamsUntilAuthorized != nil && connection.peerCertificate == nil,
            authenticated: connection.isAuthenticated,
            idleTimeout: configuration.configuration.idleTimeout != nil
        )
        self.idleTimeouts = configuration.configuration.idleTimeoutsOfOneConnection()
        self.floodLimit = HTTP2FrameFloodLimit(
            burst: configuration.configuration.floodBurst,
            perSecond: configuration.configuration.floodFramesPerSecond
        )
    }

    // MARK: Channel events

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        do {
            session = try NGHTTP2Session(
                role: .server,
                limits: configuration.session,
                initialMaxConcurrentStreams: policy.isGated ? configuration.streamsUntilAuthorized : nil,
                sharingFrameBuffer: true,
                delegate: self
            )
        } catch {
            logger.error("cannot create HTTP/2 session", metadata: ["error": "\(error)"])
            perform(policy.connectionClosed())
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
        perform(policy.sessionStarted())
        // The handler is added while the client's first bytes wait to be read: the read's flush
        // sends these SETTINGS with the answer to them, in one write and one segment. The
        // scheduled flush is for a session started with nothing to read (TLS that chose h2).
        if context.channel.isActive { output?.scheduleFlush() }
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
        guard !policy.isClosed, let output else { return }
        do {
            try output.receive(unwrapInboundIn(data))
        } catch {
            logger.debug("closing HTTP/2 connection on protocol error", metadata: ["error": "\(error)"])
            if floodLimitExceeded || Self.floods.contains((error as? NGHTTP2Error)?.code ?? 0) {
                connection.statistics?.floodClosed()
            }
            logger.trace("closing after flush", metadata: ["h2.open_streams": "\(policy.openStreams)"])
            perform(policy.connectionClosed())
            // For protocol errors nghttp2 has queued a GOAWAY; send whatever it has, then close.
            output.closeAfterFlush()
        }
    }

    /// What nghttp2 answers a flood with: more unread PING/SETTINGS acks than
    /// `HTTP2SessionLimits.maxOutboundAcks`, more CONTINUATION frames than `maxContinuations`.
    private static let floods: Set<Int32> = [NGHTTP2_ERR_FLOODED.rawValue, NGHTTP2_ERR_TOO_MANY_CONTINUATIONS.rawValue]

    func channelReadComplete(context: ChannelHandlerContext) {
        if awaitsRequest { perform(policy.requestsArriving()) }
        output?.flush()
        context.fireChannelReadComplete()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        let isWritable = context.channel.isWritable
        perform(policy.writabilityChanged(isWritable: isWritable))
        if isWritable {
            output?.flush()
            if readHeld {
                readHeld = false
                context.read()
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
            logger.trace("graceful shutdown requested", metadata: ["h2.open_streams": "\(policy.openStreams)"])
            guard output != nil else { return }
            perform(policy.quiesceRequested())
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        logger.debug("HTTP/2 connection error", metadata: ["error": "\(error)"])
        context.close(promise: nil)
    }

    private func tearDown() {
        output?.tearDown()
        // Streams still open end with the connection, once (a handler removed after its channel
        // went inactive tears down twice). Not decided by the policy's state: a protocol error
        // closes the policy before the teardown, and the gauge kept that connection's streams.
        if !streamsUncounted {
            streamsUncounted = true
            connection.statistics?.addStreams(-policy.openStreams)
        }
        perform(policy.connectionClosed())
        let open = writers
        writers = [:]
        for pending in requests.values { _ = takeBody(of: pending) }
        requests = [:]
        for writer in open.values { writer.streamClosed(.connectionClosed) }
    }

    // MARK: Policy

    /// Does what the connection policy decided, in the order its actions are listed. Inlined:
    /// most events (a stream opening or closing) decide nothing, and then this costs a few tests.
    @inline(__always)
    func perform(_ actions: HTTP2ConnectionPolicy.Actions) {
        if !actions.cancel.isEmpty { cancel(actions.cancel) }
        if let submission = actions.submit { submit(submission) }
        if actions.notifyShutdown {
            for writer in writers.values { writer.shutdownRequested() }
        }
        if !actions.arm.isEmpty { arm(actions.arm) }
        if actions.close { context?.close(promise: nil) }
    }

    private func submit(_ submission: HTTP2ConnectionPolicy.Submission) {
        switch submission {
        case .goAway(let reason):
            let debugData: [UInt8]
            switch reason {
            case .idleTimeout: debugData = Self.idleTimeoutDebugData
            case .shutdown: debugData = Self.shutdownDebugData
            case .application: debugData = goAwayDebugData
            }
            session.submitGoAway(
                lastStreamID: session.lastProcessedStreamID,
                errorCode: NGHTTP2_NO_ERROR.rawValue,
                debugData: debugData
            )
        case .fullConcurrency:
            session.submitMaxConcurrentStreams(configuration.session.maxConcurrentStreams)
        case .noHeaderTable:
            session.submitHeaderTableSize(0)
        }
        // Submissions come from nghttp2's callbacks (a stream closing) and from timers alike: the
        // next flush sends them, and with nothing left to do closes the connection.
        output?.scheduleFlush()
    }

    private func cancel(_ timers: HTTP2ConnectionPolicy.Timers) {
        if timers.contains(.idle) {
            idleTimer?.cancel()
            idleTimer = nil
        }
        if timers.contains(.finish) {
            finishTimer?.cancel()
            finishTimer = nil
        }
        if timers.contains(.stall) {
            stallTimer?.cancel()
            stallTimer = nil
        }
        if timers.contains(.request) {
            requestTimer?.cancel()
            requestTimer = nil
        }
    }

    private func arm(_ timers: HTTP2ConnectionPolicy.Timers) {
        guard let context else { return }
        let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
        let eventLoop = context.eventLoop
        if timers.contains(.idle), var timeout = idleTimeouts.idle {
            if !policy.isAuthenticated, let shorter = idleTimeouts.unauthenticated { timeout = min(timeout, shorter) }
            idleTimer?.cancel()
            idleTimer = eventLoop.scheduleTask(in: timeout) { loopBound.value.idleTimerFired() }
        }
        if timers.contains(.finish) {
            finishTimer?.cancel()
            finishTimer = eventLoop.scheduleTask(in: configuration.goAwayFinishTimeout) {
                loopBound.value.finishTimerFired()
            }
        }
        if timers.contains(.stall) {
            stallTimer?.cancel()
            stallTimer = eventLoop.scheduleTask(in: configuration.writeStallTimeout) {
                loopBound.value.stallTimerFired()
            }
        }
        if timers.contains(.request), let oldest = requests.values.lazy.filter({ !$0.rejected }).map(\.startedAt).min()
        {
            requestTimer?.cancel()
            requestTimer = eventLoop.scheduleTask(deadline: oldest + configuration.requestTimeout) {
                loopBound.value.requestTimerFired()
            }
        }
    }

    private func idleTimerFired() {
        idleTimer = nil
        let actions = policy.idleTimerFired()
        if actions.submit != nil {
            logger.debug("closing idle HTTP/2 connection")
            connection.statistics?.count(.idle)
        }
        // With no stream open, nghttp2 is done once this GOAWAY is out; the flush then closes.
        perform(actions)
    }

    private func finishTimerFired() {
        finishTimer = nil
        let actions = policy.finishTimerFired()
        if actions.submit != nil {
            logger.debug(
                "sending GOAWAY with streams still open",
                metadata: ["h2.open_streams": "\(policy.openStreams)"]
            )
        }
        perform(actions)
    }

    private func stallTimerFired() {
        stallTimer = nil
        let actions = policy.stallTimerFired()
        if actions.close {
            logger.debug("closing HTTP/2 connection: the peer has read nothing for too long")
            connection.statistics?.count(.stalledReader)
        }
        perform(actions)
    }

    // MARK: Application requests (ConnectionControl)

    func peerAuthenticated() {
        guard session != nil else { return }
        perform(policy.peerAuthenticated())
    }

    func classified(as role: ConnectionRole) {
        guard session != nil else { return }
        perform(policy.classified(as: role))
    }

    func goAway(debugData: [UInt8]) {
        guard session != nil else { return }
        guard !policy.isClosed else { return }
        logger.debug(
            "closing HTTP/2 connection",
            metadata: ["h2.goaway_debug_data": "\(String(decoding: debugData, as: UTF8.self))"]
        )
        goAwayDebugData = debugData
        perform(policy.goAwayRequested())
    }

    /// APNs' GOAWAY debug data for the transport's own reasons.
    private static let idleTimeoutDebugData = Array(#"{"reason":"IdleTimeout"}"#.utf8)
    private static let shutdownDebugData = Array(#"{"reason":"Shutdown"}"#.utf8)

    // MARK: Responses (HTTPResponseSink)

    func sendResponse(_ response: HTTPServerResponse, streamID: Int32) {
        guard !policy.isClosed, session.claimResponse(streamID: streamID) else { return }
        // A HEAD answer is its head alone, ending the stream (a body would be a protocol error).
        let answersHEAD = headStreams.remove(streamID) != nil
        do {
            try session.submitResponse(
                streamID: streamID,
                status: response.head.status,
                headers: response.head.headers,
                body: answersHEAD ? nil : response.body,
                streaming: false
            )
        } catch {
            logger.debug("response not sent", metadata: ["error": "\(error)", "h2.stream": "\(streamID)"])
            return
        }
        output?.scheduleFlush()
    }

    func startStreaming(_ head: ResponseHead, streamID: Int32, writer: ResponseBodyWriter) -> Bool {
        guard !policy.isClosed, session.claimResponse(streamID: streamID) else { return false }
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
        if policy.isShuttingDown { writer.shutdownRequested() }
        output?.scheduleFlush()
        return true
    }

    func writeBody(_ buffer: ByteBuffer?, end: Bool, streamID: Int32) -> Bool {
        guard !policy.isClosed, session.appendBody(streamID: streamID, buffer, end: end) else { return false }
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
        guard !policy.isClosed else { return }
        session.resetStream(streamID, errorCode: NGHTTP2_CANCEL.rawValue)
        output?.scheduleFlush()
    }
}

extension HTTP2ServerHandler: HTTP2OutputFlusherDelegate {
    func outputClosing(after error: (any Error)?) {
        if let error {
            logger.debug("HTTP/2 send failed", metadata: ["error": "\(error)"])
        } else {
            logger.trace("HTTP/2 session finished")
        }
        perform(policy.connectionClosed())
    }
}

@available(*, unavailable)
extension HTTP2ServerHandler: Sendable {}
