import CNGHTTP2
import NIOCore
import NIOHTTP1

/// What the nghttp2 session reports to the server handler: requests assembled from their header
/// blocks and DATA frames, admitted by the application on their head, buffered within the
/// limits (the route's, the connection's, the server's budget) and handed over once whole;
/// streams closing, PING acks, streamed bodies drained.
extension HTTP2ServerHandler {
    /// A request whose headers and body are still arriving.
    final class PendingRequest {
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
        /// Past `maxHeaderListSize`: the rest of the block is decoded (HPACK state is the
        /// connection's) but not kept, and the request is answered 431 when the block ends.
        var headerListTooLarge = false
        var body: ByteBuffer?
        /// Set when the application admits the request on its head.
        var maxBodySize = 0
        var rejected = false
        /// The event loop's time (not the wall clock): the request timer runs on it.
        let startedAt: NIODeadline

        init(startedAt: NIODeadline) {
            self.startedAt = startedAt
        }
    }

    /// Resets requests that have been arriving for longer than `requestTimeout` (a peer that
    /// opens streams and never finishes them); the timer then runs on for the oldest remaining one.
    func requestTimerFired() {
        requestTimer = nil
        guard policy.requestTimerFired() else { return }
        let cutoff = connection.eventLoop.now - configuration.requestTimeout
        for (streamID, pending) in requests where pending.startedAt <= cutoff && !pending.rejected {
            logger.debug("resetting a request that did not arrive in time", metadata: ["h2.stream": "\(streamID)"])
            _ = takeBody(of: pending)
            pending.rejected = true
            session.resetStream(streamID, errorCode: NGHTTP2_CANCEL.rawValue)
            connection.statistics?.count(.request)
        }
        if awaitsRequest { perform(policy.requestsArriving()) }
        output?.scheduleFlush()
    }

    /// A request is still arriving that no one has answered or reset. Answered and reset ones
    /// stay in `requests` until their stream closes, which waits on the peer (its flow-control
    /// window for the answer, its reading for the RST_STREAM): the request timer must not wait
    /// for them, or it is armed again for a deadline already past and fires on every turn of
    /// the event loop.
    var awaitsRequest: Bool {
        requests.values.contains { !$0.rejected }
    }

    private func reportIfNoRequestArriving() {
        if !awaitsRequest { perform(policy.noRequestsArriving()) }
    }

    /// Takes a request's body away from it, for the application or to drop it: the connection's
    /// count and the server's budget no longer hold its bytes.
    func takeBody(of pending: PendingRequest) -> ByteBuffer? {
        guard let body = pending.body else { return nil }
        pending.body = nil
        bufferedRequestBytes -= body.readableBytes
        bodyBudget.release(body.readableBytes)
        return body
    }

    private func request(_ pending: PendingRequest, streamID: Int32, body: ByteBuffer) -> HTTPServerRequest {
        if pending.method == "HEAD" { headStreams.insert(streamID) }
        return HTTPServerRequest(
            method: pending.method,
            path: pending.path,
            authority: pending.authority,
            scheme: pending.scheme,
            headers: pending.headers,
            body: body,
            connection: connection
        )
    }

    private func responder(streamID: Int32) -> HTTPResponder {
        HTTPResponder(sink: self, streamID: streamID, eventLoop: context.eventLoop)
    }

    /// The application judges the request on its head, before a byte of body is buffered.
    private func admit(_ pending: PendingRequest, streamID: Int32, endStream: Bool) {
        switch application.admit(
            request(pending, streamID: streamID, body: ByteBuffer()),
            responder: responder(streamID: streamID)
        ) {
        case .readBody(let limit):
            pending.maxBodySize = min(limit, configuration.maxRequestBodySize)
        case .answered:
            pending.rejected = true
            if !endStream { earlyAnswers[streamID] = .answering }
        }
    }

    private func dispatch(streamID: Int32) {
        guard let pending = requests.removeValue(forKey: streamID) else { return }
        reportIfNoRequestArriving()
        guard !pending.rejected else { return }
        let body = takeBody(of: pending) ?? ByteBuffer()
        application.handle(request(pending, streamID: streamID, body: body), responder: responder(streamID: streamID))
    }

    private func reject(_ pending: PendingRequest, streamID: Int32, _ refusal: TransportRefusal) {
        pending.rejected = true
        _ = takeBody(of: pending)
        earlyAnswers[streamID] = .answering
        application.refuse(
            request(pending, streamID: streamID, body: ByteBuffer()),
            refusal,
            responder: responder(streamID: streamID)
        )
    }

    /// RST_STREAM REFUSED_STREAM: the request was not processed and may be retried as it is
    /// (RFC 9113 section 8.7), which HTTP/2 clients do by themselves.
    private func refuseStream(_ pending: PendingRequest, streamID: Int32, because reason: String) {
        logger.debug("refusing a stream: \(reason)", metadata: ["h2.stream": "\(streamID)"])
        pending.rejected = true
        _ = takeBody(of: pending)
        session.resetStream(streamID, errorCode: NGHTTP2_REFUSED_STREAM.rawValue)
    }
}

/// Where the answer to a request refused before its body ended stands.
enum EarlyAnswer {
    case answering
    case answered
}

extension HTTP2ServerHandler: NGHTTP2SessionDelegate {
    private static let methodName = Array(":method".utf8)
    private static let pathName = Array(":path".utf8)
    private static let authorityName = Array(":authority".utf8)
    private static let schemeName = Array(":scheme".utf8)

    func sessionBeginHeaders(streamID: Int32, category: nghttp2_headers_category) -> Bool {
        guard category == NGHTTP2_HCAT_REQUEST else { return true }
        let pending = PendingRequest(startedAt: connection.eventLoop.now)
        requests[streamID] = pending
        headerStreamID = streamID
        headerRequest = pending
        perform(policy.streamOpened())
        connection.statistics?.addStreams(1)
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
        guard !pending.headerListTooLarge else { return true }
        pending.headerListSize += name.count + value.count + 32
        if pending.headerListSize > configuration.session.maxHeaderListSize {
            pending.headerListTooLarge = true
            return true
        }
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
            pending.headers.add(
                name: String(decoding: name, as: UTF8.self),
                value: String(decoding: value, as: UTF8.self)
            )
        }
        return true
    }

    func sessionHeadersComplete(streamID: Int32, category: nghttp2_headers_category, endStream: Bool) {
        // Trailers (another category) follow an admitted head.
        if category == NGHTTP2_HCAT_REQUEST,
            let pending = streamID == headerStreamID ? headerRequest : requests[streamID]
        {
            if policy.refusesNewStreams {
                refuseStream(pending, streamID: streamID, because: "its GOAWAY waits for the open streams")
            } else if pending.headerListTooLarge {
                reject(pending, streamID: streamID, .headerListTooLarge(limit: configuration.session.maxHeaderListSize))
            } else {
                admit(pending, streamID: streamID, endStream: endStream)
            }
        }
        headerRequest = nil
        headerStreamID = 0
        if endStream { dispatch(streamID: streamID) }
    }

    func sessionData(streamID: Int32, bytes: UnsafeRawBufferPointer) -> Bool {
        guard let pending = requests[streamID], !pending.rejected else { return true }
        let size = (pending.body?.readableBytes ?? 0) + bytes.count
        if size > pending.maxBodySize {
            reject(pending, streamID: streamID, .bodyTooLarge(limit: pending.maxBodySize))
            return true
        }
        if bufferedRequestBytes + bytes.count > configuration.maxBufferedRequestBytes {
            refuseStream(pending, streamID: streamID, because: "the connection holds too many request bytes")
            return true
        }
        guard bodyBudget.take(bytes.count, authenticated: connection.isAuthenticated) else {
            refuseStream(pending, streamID: streamID, because: "the server's request body budget is spent")
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

    /// A stream answered early is reset, RST_STREAM(NO_ERROR) telling the client to stop sending
    /// its body (RFC 9113 section 8.1), only when body still arrives after the answer went out. A
    /// client whose last DATA frame was already on its way, as curl's is over TLS where HEADERS
    /// and DATA travel in separate records, then sees a plain answer: curl 7.88 reports a reset
    /// after a request it finished sending as an error (exit 92).
    func sessionDataFrame(streamID: Int32, endStream: Bool) {
        // Nearly always empty: a request's end costs no hash lookup then.
        guard !earlyAnswers.isEmpty else {
            if endStream { dispatch(streamID: streamID) }
            return
        }
        if endStream {
            earlyAnswers[streamID] = nil
            dispatch(streamID: streamID)
        } else if earlyAnswers[streamID] == .answered {
            earlyAnswers[streamID] = nil
            session.resetStream(streamID, errorCode: NGHTTP2_NO_ERROR.rawValue)
        }
    }

    func sessionStreamClosed(streamID: Int32, errorCode: UInt32) {
        if let pending = requests.removeValue(forKey: streamID) {
            _ = takeBody(of: pending)
            reportIfNoRequestArriving()
        }
        if !earlyAnswers.isEmpty { earlyAnswers[streamID] = nil }
        if !headStreams.isEmpty { headStreams.remove(streamID) }
        if let writer = writers.removeValue(forKey: streamID) {
            writer.streamClosed(errorCode == NGHTTP2_NO_ERROR.rawValue ? .finished : .reset(errorCode: errorCode))
        }
        // Going away, the connection closes from the flush once nghttp2 reports the session done;
        // closing here, inside an nghttp2 callback, would cut off frames not yet written.
        let open = policy.openStreams
        perform(policy.streamClosed())
        connection.statistics?.addStreams(policy.openStreams - open)
    }

    func sessionGoAwayReceived(lastStreamID: Int32, errorCode: UInt32, debugData: UnsafeRawBufferPointer) {}

    func sessionSettingsReceived() {}

    func sessionBodyDrained(streamID: Int32, remaining: Int) {
        writers[streamID]?.bodyDrained(remaining: remaining)
    }

    func sessionWastedFrame() -> Bool {
        guard !floodLimit.take(now: context.eventLoop.now) else { return true }
        floodLimitExceeded = true
        session.terminate(errorCode: NGHTTP2_ENHANCE_YOUR_CALM.rawValue)
        return false
    }

    func sessionEndStreamSent(streamID: Int32) {
        if earlyAnswers[streamID] != nil { earlyAnswers[streamID] = .answered }
    }

    /// The gateway's own GOAWAYs carry NO_ERROR or ENHANCE_YOUR_CALM. INTERNAL_ERROR is
    /// nghttp2's, which sends it by itself when a peer resets streams faster than its rapid-reset
    /// limit (CVE-2023-44487) lets (or when it runs out of memory): a flood, counted as the others.
    func sessionGoAwaySent(errorCode: UInt32) {
        guard errorCode == NGHTTP2_INTERNAL_ERROR.rawValue, !rapidResetClosure else { return }
        rapidResetClosure = true
        connection.statistics?.floodClosed()
    }
}
