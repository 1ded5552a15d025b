import CNGHTTP2

/// The C callbacks nghttp2 calls during `receive` and `drain`: each finds its session through
/// nghttp2's user data and reports to the session's delegate; the read callback copies a queued
/// body into DATA frames.
extension NGHTTP2Session {
    private static func from(_ userData: UnsafeMutableRawPointer?) -> NGHTTP2Session {
        Unmanaged<NGHTTP2Session>.fromOpaque(userData!).takeUnretainedValue()
    }

    static let readCallback: nghttp2_data_source_read_callback = {
        _,
        streamID,
        buffer,
        length,
        flags,
        _,
        userData in
        NGHTTP2Session.from(userData).readBody(streamID: streamID, into: buffer!, length: length, flags: flags!)
    }

    private func readBody(
        streamID: Int32,
        into destination: UnsafeMutablePointer<UInt8>,
        length: Int,
        flags: UnsafeMutablePointer<UInt32>
    ) -> Int {
        guard let outbound = bodies[streamID] else {
            flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
            return 0
        }
        var written = 0
        while written < length, var chunk = outbound.chunks.first {
            let n = min(length - written, chunk.readableBytes)
            chunk.withUnsafeReadableBytes { bytes in
                (destination + written).update(
                    from: bytes.baseAddress!.assumingMemoryBound(to: UInt8.self),
                    count: n
                )
            }
            written += n
            if n == chunk.readableBytes {
                outbound.chunks.removeFirst()
            } else {
                chunk.moveReaderIndex(forwardBy: n)
                outbound.chunks[outbound.chunks.startIndex] = chunk
            }
        }
        outbound.buffered -= written
        if outbound.chunks.isEmpty {
            if outbound.ended {
                flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
                bodies[streamID] = nil
            } else if written == 0 {
                outbound.deferred = true
                return Int(NGHTTP2_ERR_DEFERRED.rawValue)
            }
        }
        if written > 0 {
            delegate.sessionBodyDrained(streamID: streamID, remaining: outbound.buffered)
        }
        return written
    }

    static func install(callbacks: OpaquePointer?) {
        nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks) { _, frame, userData in
            let frame = frame!.pointee
            let ok = NGHTTP2Session.from(userData).delegate.sessionBeginHeaders(
                streamID: frame.hd.stream_id,
                category: frame.headers.cat
            )
            return ok ? 0 : NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue
        }
        nghttp2_session_callbacks_set_on_header_callback(callbacks) {
            _,
            frame,
            name,
            nameLength,
            value,
            valueLength,
            _,
            userData in
            let frame = frame!.pointee
            let ok = NGHTTP2Session.from(userData).delegate.sessionHeader(
                streamID: frame.hd.stream_id,
                category: frame.headers.cat,
                name: UnsafeBufferPointer(start: name, count: nameLength),
                value: UnsafeBufferPointer(start: value, count: valueLength)
            )
            return ok ? 0 : NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue
        }
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks) {
            _,
            _,
            streamID,
            data,
            length,
            userData in
            let ok = NGHTTP2Session.from(userData).delegate.sessionData(
                streamID: streamID,
                bytes: UnsafeRawBufferPointer(start: data, count: length)
            )
            return ok ? 0 : NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue
        }
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks) { _, frame, userData in
            let frame = frame!.pointee
            let delegate = NGHTTP2Session.from(userData).delegate
            let endStream = frame.hd.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0
            switch UInt32(frame.hd.type) {
            case NGHTTP2_HEADERS.rawValue:
                delegate.sessionHeadersComplete(
                    streamID: frame.hd.stream_id,
                    category: frame.headers.cat,
                    endStream: endStream
                )
            case NGHTTP2_DATA.rawValue:
                delegate.sessionDataFrame(streamID: frame.hd.stream_id, endStream: endStream)
                if !endStream, frame.hd.length == 0, !delegate.sessionWastedFrame() {
                    return NGHTTP2_ERR_CALLBACK_FAILURE.rawValue
                }
            case NGHTTP2_GOAWAY.rawValue:
                delegate.sessionGoAwayReceived(
                    lastStreamID: frame.goaway.last_stream_id,
                    errorCode: frame.goaway.error_code,
                    debugData: UnsafeRawBufferPointer(
                        start: frame.goaway.opaque_data,
                        count: frame.goaway.opaque_data_len
                    )
                )
            case NGHTTP2_SETTINGS.rawValue:
                if frame.hd.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) == 0 { delegate.sessionSettingsReceived() }
            default:
                break
            }
            return 0
        }
        // A frame nghttp2 refused with a stream error (it has queued the RST_STREAM).
        nghttp2_session_callbacks_set_on_invalid_frame_recv_callback(callbacks) { _, _, _, userData in
            NGHTTP2Session.from(userData).delegate.sessionWastedFrame() ? 0 : NGHTTP2_ERR_CALLBACK_FAILURE.rawValue
        }
        nghttp2_session_callbacks_set_on_frame_send_callback(callbacks) { _, frame, userData in
            let header = frame!.pointee.hd
            let type = UInt32(header.type)
            if type == NGHTTP2_DATA.rawValue || type == NGHTTP2_HEADERS.rawValue,
                header.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0
            {
                NGHTTP2Session.from(userData).delegate.sessionEndStreamSent(streamID: header.stream_id)
            } else if type == NGHTTP2_GOAWAY.rawValue {
                NGHTTP2Session.from(userData).delegate.sessionGoAwaySent(errorCode: frame!.pointee.goaway.error_code)
            }
            return 0
        }
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks) { _, streamID, errorCode, userData in
            let session = NGHTTP2Session.from(userData)
            session.bodies[streamID] = nil
            session.delegate.sessionStreamClosed(streamID: streamID, errorCode: errorCode)
            return 0
        }
    }
}
