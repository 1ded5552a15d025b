import CNGHTTP2
import NIOCore

/// Receives what an nghttp2 session parses. All calls happen synchronously inside
/// `NGHTTP2Session.receive(_:)` or `drain(into:)`, on the owning event loop.
protocol NGHTTP2SessionDelegate: AnyObject {
    /// A HEADERS frame opens (server: a request; client: a response or trailers). Return false to
    /// reset the stream.
    func sessionBeginHeaders(streamID: Int32, category: nghttp2_headers_category) -> Bool
    /// Return false to reset the stream (e.g. the header list is over its limit).
    func sessionHeader(
        streamID: Int32,
        category: nghttp2_headers_category,
        name: UnsafeBufferPointer<UInt8>,
        value: UnsafeBufferPointer<UInt8>
    ) -> Bool
    func sessionHeadersComplete(streamID: Int32, category: nghttp2_headers_category, endStream: Bool)
    /// Return false to reset the stream (e.g. the body is over its limit).
    func sessionData(streamID: Int32, bytes: UnsafeRawBufferPointer) -> Bool
    /// A DATA frame was received whole; `endStream` when it ends the peer's side of the stream.
    func sessionDataFrame(streamID: Int32, endStream: Bool)
    func sessionStreamClosed(streamID: Int32, errorCode: UInt32)
    func sessionGoAwayReceived(lastStreamID: Int32, errorCode: UInt32, debugData: UnsafeRawBufferPointer)
    /// The peer's SETTINGS (not an acknowledgement of ours) were received and applied.
    func sessionSettingsReceived()
    /// nghttp2 took bytes of a streamed body into DATA frames; `remaining` are still queued here.
    func sessionBodyDrained(streamID: Int32, remaining: Int)
    /// A frame carrying END_STREAM for `streamID` was serialized: our side of it is done.
    func sessionEndStreamSent(streamID: Int32)
    /// A GOAWAY was serialized, ours or one nghttp2 queued by itself.
    func sessionGoAwaySent(errorCode: UInt32)
    /// A frame arrived that makes us work for nothing: an empty DATA frame not ending its stream,
    /// or one nghttp2 refused with a stream error. Return false to fail the session (after
    /// `terminate(errorCode:)`, so that a GOAWAY says why).
    func sessionWastedFrame() -> Bool
}

/// Protocol limits and settings for one HTTP/2 session.
public struct HTTP2SessionLimits: Sendable {
    /// SETTINGS_MAX_CONCURRENT_STREAMS we advertise.
    public var maxConcurrentStreams: UInt32 = 1000
    /// SETTINGS_INITIAL_WINDOW_SIZE we advertise: how much a peer may send on one stream before
    /// we acknowledge it.
    public var initialStreamWindowSize: Int32 = 256 * 1024
    /// Our connection-level receive window.
    public var connectionWindowSize: Int32 = 1024 * 1024
    /// SETTINGS_MAX_HEADER_LIST_SIZE we advertise and enforce on each received header block.
    public var maxHeaderListSize: Int = 32 * 1024
    /// Largest header block we will send.
    public var maxSendHeaderBlockLength: Int = 64 * 1024
    /// Our HPACK encoder's dynamic table (the peer's SETTINGS_HEADER_TABLE_SIZE caps it too).
    /// Responses of a gateway repeat few fields worth indexing: each `apns-id` is new, and
    /// indexing it costs an allocation per response and table memory on every connection.
    public var maxDeflateDynamicTableSize: Int = 4096
    /// Rapid-reset protection (CVE-2023-44487): a token bucket of RST_STREAMs a peer may cause.
    public var streamResetBurst: UInt64 = 1000
    public var streamResetRatePerSecond: UInt64 = 33
    /// CONTINUATION-flood protection (CVE-2024-28182).
    public var maxContinuations: Int = 8
    /// SETTINGS-flood protection: entries in one SETTINGS frame.
    public var maxSettings: Int = 32
    /// Outbound PING/SETTINGS ACKs queued before the session fails (a peer not reading them).
    public var maxOutboundAcks: Int = 1000

    public init() {}
}

/// An error nghttp2 reported, with its code and nghttp2's own text.
public struct NGHTTP2Error: Error, CustomStringConvertible, Sendable {
    public var code: Int32
    public var operation: String

    public var description: String {
        let text = String(cString: nghttp2_strerror(code))
        return "HTTP/2 \(operation) failed: \(text) (nghttp2 error \(code))"
    }
}

/// The C wrapper around one `nghttp2_session` in server or client mode, over memory buffers.
///
/// Owns the session and the bodies it sends. Confined to one event loop: nghttp2 is not thread
/// safe and calls back into `delegate` synchronously.
final class NGHTTP2Session {
    enum Role { case server, client }

    /// A body being sent on one stream: queued bytes that nghttp2 pulls into DATA frames.
    final class OutboundBody {
        var chunks = CircularBuffer<ByteBuffer>(initialCapacity: 2)
        var buffered = 0
        var ended = false
        /// The read callback returned DEFERRED: nghttp2 waits for `resume_data`.
        var deferred = false
    }

    private var session: OpaquePointer?
    // Not private: the C callbacks (NGHTTP2Session+Callbacks.swift) use these two.
    unowned(unsafe) let delegate: any NGHTTP2SessionDelegate
    var bodies: [Int32: OutboundBody] = [:]
    let role: Role
    /// Set when the session serializes into its thread's shared frame buffer.
    private(set) var sharedFrameBuffer: SharedFrameBuffer?
    private let frameBufferLease: UnsafeMutablePointer<SharedFrameBufferLease>?

    /// - Parameter manualFlowControl: when true, received DATA is acknowledged to the peer only
    ///   through `consume`, so a slow consumer makes the peer wait instead of making us buffer.
    /// - Parameter sharingFrameBuffer: serialize into the calling event-loop thread's
    ///   `SharedFrameBuffer` (when called on one) instead of a buffer of this session's own.
    init(
        role: Role,
        limits: HTTP2SessionLimits,
        manualFlowControl: Bool = false,
        initialMaxConcurrentStreams: UInt32? = nil,
        sharingFrameBuffer: Bool = false,
        delegate: any NGHTTP2SessionDelegate
    ) throws {
        self.role = role
        self.delegate = delegate
        let shared = sharingFrameBuffer ? SharedFrameBuffer.current : nil
        var lease: UnsafeMutablePointer<SharedFrameBufferLease>?
        if let shared {
            lease = .allocate(capacity: 1)
            lease!.initialize(to: SharedFrameBufferLease(shared: shared.memory))
        }

        var callbacks: OpaquePointer?
        nghttp2_session_callbacks_new(&callbacks)
        defer { nghttp2_session_callbacks_del(callbacks) }
        Self.install(callbacks: callbacks)

        var options: OpaquePointer?
        nghttp2_option_new(&options)
        defer { nghttp2_option_del(options) }
        nghttp2_option_set_max_send_header_block_length(options, limits.maxSendHeaderBlockLength)
        nghttp2_option_set_max_deflate_dynamic_table_size(options, limits.maxDeflateDynamicTableSize)
        nghttp2_option_set_max_settings(options, limits.maxSettings)
        nghttp2_option_set_max_outbound_ack(options, limits.maxOutboundAcks)
        nghttp2_option_set_stream_reset_rate_limit(
            options,
            limits.streamResetBurst,
            limits.streamResetRatePerSecond
        )
        nghttp2_option_set_max_continuations(options, limits.maxContinuations)
        // Closed streams are kept only for RFC 7540 priorities, which we turn off: they would
        // otherwise cost memory on connections that live for days.
        nghttp2_option_set_no_closed_streams(options, 1)
        if manualFlowControl { nghttp2_option_set_no_auto_window_update(options, 1) }

        self.frameBufferLease = lease
        let userData = Unmanaged.passUnretained(self).toOpaque()
        var created: OpaquePointer?
        // A nil allocator is nghttp2's default (malloc).
        func create(_ allocator: UnsafeMutablePointer<nghttp2_mem>?) -> Int32 {
            switch role {
            case .server: nghttp2_session_server_new3(&created, callbacks, userData, options, allocator)
            case .client: nghttp2_session_client_new3(&created, callbacks, userData, options, allocator)
            }
        }
        let rc: Int32
        if let lease {
            // nghttp2 copies the allocator; its user data (the lease) lives as long as we do.
            var allocator = SharedFrameBufferLease.allocator(for: lease)
            rc = create(&allocator)
        } else {
            rc = create(nil)
        }
        guard rc == 0, let created else { throw NGHTTP2Error(code: rc, operation: "session creation") }
        self.session = created
        if lease?.pointee.taken == true { sharedFrameBuffer = shared }

        var settings: [nghttp2_settings_entry] = [
            .init(
                settings_id: Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue),
                value: initialMaxConcurrentStreams ?? limits.maxConcurrentStreams
            ),
            .init(
                settings_id: Int32(NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE.rawValue),
                value: UInt32(limits.initialStreamWindowSize)
            ),
            .init(
                settings_id: Int32(NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE.rawValue),
                value: UInt32(limits.maxHeaderListSize)
            ),
            .init(settings_id: Int32(NGHTTP2_SETTINGS_ENABLE_PUSH.rawValue), value: 0),
            .init(settings_id: Int32(NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES.rawValue), value: 1),
        ]
        let settingsRC = nghttp2_submit_settings(created, UInt8(NGHTTP2_FLAG_NONE.rawValue), &settings, settings.count)
        guard settingsRC == 0 else { throw NGHTTP2Error(code: settingsRC, operation: "SETTINGS") }
        let windowRC = nghttp2_session_set_local_window_size(
            created,
            UInt8(NGHTTP2_FLAG_NONE.rawValue),
            0,
            limits.connectionWindowSize
        )
        guard windowRC == 0 else { throw NGHTTP2Error(code: windowRC, operation: "connection window") }
    }

    deinit {
        nghttp2_session_del(session)
        frameBufferLease?.deallocate()
    }

    /// Queues GOAWAY with `errorCode` and ends the session once it is sent.
    func terminate(errorCode: UInt32) {
        nghttp2_session_terminate_session(session, errorCode)
    }

    // MARK: Bytes in and out

    /// Feeds received bytes to the session. Throws on a fatal protocol error; by then nghttp2 has
    /// queued a GOAWAY, so drain before closing.
    func receive(_ buffer: ByteBuffer) throws {
        let rc = buffer.withUnsafeReadableBytes { bytes -> Int in
            guard let base = bytes.baseAddress, bytes.count > 0 else { return 0 }
            return pg_nghttp2_mem_recv(session, base.assumingMemoryBound(to: UInt8.self), bytes.count)
        }
        if rc < 0 { throw NGHTTP2Error(code: Int32(rc), operation: "receive") }
    }

    /// Appends serialized frames to `buffer` until nghttp2 has nothing more or `buffer` holds
    /// `limit` bytes. Returns true when nghttp2 may still have frames to send.
    func drain(into buffer: inout ByteBuffer, limit: Int) throws -> Bool {
        if let shared = sharedFrameBuffer {
            // Frames are copied out before `drain` returns, so only a drain nested inside
            // another session's callbacks could overwrite one; handlers never do that.
            guard !shared.busy else {
                assertionFailure("an HTTP/2 session serialized inside another session's send")
                throw NGHTTP2Error(
                    code: NGHTTP2_ERR_INVALID_STATE.rawValue,
                    operation: "send (nested in another session's send)"
                )
            }
            shared.busy = true
            defer { shared.busy = false }
            return try drainFrames(into: &buffer, limit: limit)
        }
        return try drainFrames(into: &buffer, limit: limit)
    }

    private func drainFrames(into buffer: inout ByteBuffer, limit: Int) throws -> Bool {
        while buffer.readableBytes < limit {
            var pointer: UnsafePointer<UInt8>?
            let n = pg_nghttp2_mem_send(session, &pointer)
            if n < 0 { throw NGHTTP2Error(code: Int32(n), operation: "send") }
            if n == 0 { return false }
            buffer.writeBytes(UnsafeRawBufferPointer(start: pointer, count: n))
        }
        return true
    }

    var wantsRead: Bool { nghttp2_session_want_read(session) != 0 }
    var wantsWrite: Bool { nghttp2_session_want_write(session) != 0 }
    var lastProcessedStreamID: Int32 { nghttp2_session_get_last_proc_stream_id(session) }

    // MARK: Submitting

    /// Claims the one response of a stream opened by the peer: false when the stream is gone or
    /// was already answered. The mark lives in nghttp2's own per-stream user data (never
    /// dereferenced), which costs nothing per stream, unlike a set of answered streams held on
    /// every connection.
    func claimResponse(streamID: Int32) -> Bool {
        // A gone stream has no user data, and setting it then fails: two lookups, not three.
        guard nghttp2_session_get_stream_user_data(session, streamID) == nil else { return false }
        return nghttp2_session_set_stream_user_data(session, streamID, UnsafeMutableRawPointer(bitPattern: 1)) == 0
    }

    /// Submits response headers; `body` nil means headers only (END_STREAM on HEADERS).
    /// `streaming` keeps the stream open for later `appendBody` calls.
    func submitResponse(streamID: Int32, status: Int, headers: HTTPFieldList, body: ByteBuffer?, streaming: Bool) throws
    {
        // nghttp2 would queue a response for a stream that is already gone and drop it only when
        // sending; checking here keeps its body from lingering in `bodies`.
        guard nghttp2_session_find_stream(session, streamID) != nil else {
            throw NGHTTP2Error(code: NGHTTP2_ERR_STREAM_CLOSED.rawValue, operation: "response submission")
        }
        let hasBody = streaming || (body.map { $0.readableBytes > 0 } ?? false)
        if hasBody {
            let outbound = OutboundBody()
            if let body, body.readableBytes > 0 {
                outbound.chunks.append(body)
                outbound.buffered = body.readableBytes
            }
            outbound.ended = !streaming
            bodies[streamID] = outbound
        }
        let rc = HeaderBlockBuilder.withResponse(status: status, headers: headers) { nva, count -> Int32 in
            if hasBody {
                var provider = nghttp2_data_provider(
                    source: nghttp2_data_source(ptr: nil),
                    read_callback: NGHTTP2Session.readCallback
                )
                return nghttp2_submit_response(session, streamID, nva, count, &provider)
            }
            return nghttp2_submit_response(session, streamID, nva, count, nil)
        }
        if rc != 0 {
            bodies[streamID] = nil
            throw NGHTTP2Error(code: rc, operation: "response submission")
        }
    }

    /// Submits a request; returns its stream id. `body` nil sends END_STREAM on HEADERS;
    /// `streaming` keeps the stream open for later `appendBody` calls.
    func submitRequest(headers: HTTPFieldList, body: ByteBuffer?, streaming: Bool = false) throws -> Int32 {
        let hasBody = streaming || (body.map { $0.readableBytes > 0 } ?? false)
        let streamID = HeaderBlockBuilder.withFields(headers) { nva, count -> Int32 in
            if hasBody {
                var provider = nghttp2_data_provider(
                    source: nghttp2_data_source(ptr: nil),
                    read_callback: NGHTTP2Session.readCallback
                )
                return nghttp2_submit_request(session, nil, nva, count, &provider, nil)
            }
            return nghttp2_submit_request(session, nil, nva, count, nil, nil)
        }
        guard streamID > 0 else { throw NGHTTP2Error(code: streamID, operation: "request submission") }
        if hasBody {
            let outbound = OutboundBody()
            if let body, body.readableBytes > 0 {
                outbound.chunks.append(body)
                outbound.buffered = body.readableBytes
            }
            outbound.ended = !streaming
            // nghttp2 pulls the body only during `drain`, so registering it now is in time.
            bodies[streamID] = outbound
        }
        return streamID
    }

    /// Queues bytes (and/or the end) of a streamed body. Returns false when the stream has no
    /// open body (closed or reset).
    func appendBody(streamID: Int32, _ buffer: ByteBuffer?, end: Bool) -> Bool {
        guard let outbound = bodies[streamID], !outbound.ended else { return false }
        if let buffer, buffer.readableBytes > 0 {
            outbound.chunks.append(buffer)
            outbound.buffered += buffer.readableBytes
        }
        outbound.ended = end
        if outbound.deferred {
            outbound.deferred = false
            if nghttp2_session_resume_data(session, streamID) != 0 {
                bodies[streamID] = nil
                return false
            }
        }
        return true
    }

    func bufferedBodyBytes(streamID: Int32) -> Int { bodies[streamID]?.buffered ?? 0 }

    func resetStream(_ streamID: Int32, errorCode: UInt32) {
        bodies[streamID] = nil
        _ = nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), streamID, errorCode)
    }

    func submitGoAway(lastStreamID: Int32, errorCode: UInt32, debugData: [UInt8] = []) {
        _ = debugData.withUnsafeBufferPointer { data in
            nghttp2_submit_goaway(
                session,
                UInt8(NGHTTP2_FLAG_NONE.rawValue),
                lastStreamID,
                errorCode,
                data.baseAddress,
                data.count
            )
        }
    }

    /// The peer's SETTINGS_MAX_CONCURRENT_STREAMS as last received.
    var remoteMaxConcurrentStreams: UInt32 {
        nghttp2_session_get_remote_settings(session, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS)
    }

    /// Announces a new SETTINGS_MAX_CONCURRENT_STREAMS (nghttp2 enforces it once acknowledged).
    func submitMaxConcurrentStreams(_ value: UInt32) {
        submitSetting(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, value)
    }

    /// Announces a new SETTINGS_HEADER_TABLE_SIZE: the most our HPACK decoder keeps of the
    /// peer's indexed fields (nghttp2 applies it, and evicts, once acknowledged).
    func submitHeaderTableSize(_ value: UInt32) {
        submitSetting(NGHTTP2_SETTINGS_HEADER_TABLE_SIZE, value)
    }

    private func submitSetting(_ id: nghttp2_settings_id, _ value: UInt32) {
        var entry = nghttp2_settings_entry(settings_id: Int32(id.rawValue), value: value)
        _ = nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &entry, 1)
    }

    /// Acknowledges `count` received body bytes to the peer (only meaningful with manual window
    /// updates; harmless otherwise).
    func consume(streamID: Int32, count: Int) {
        _ = nghttp2_session_consume(session, streamID, count)
    }
}

@available(*, unavailable)
extension NGHTTP2Session: Sendable {}
