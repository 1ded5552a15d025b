import NIOCore

/// Writes the body of a long-lived response (an event stream) after its head was sent.
///
/// Confined to `eventLoop`: every member must be used on it (hop with `eventLoop.execute`). It is
/// `Sendable` only so that it can be stored where other loops or tasks keep their state; its
/// methods check that they run on the loop.
///
/// Back-pressure: at most about `highWatermark` bytes wait in this stream's queue. Past that,
/// `write` answers `.full` and takes nothing; `onWritable` fires when the queue has drained to half.
/// A peer that stops reading therefore costs at most this much memory per stream, plus the
/// connection's bounded output buffer.
public final class ResponseBodyWriter: @unchecked Sendable {
    public struct Closed: Error, CustomStringConvertible {
        public var description: String { "the response stream is closed (reset by the peer or its connection ended)" }
    }

    public enum WriteResult: Sendable, Equatable {
        /// Queued for sending.
        case accepted
        /// Not queued: the stream's queue is at its high watermark. Wait for `onWritable`.
        case full
        /// Not queued: the stream or its connection is gone.
        case closed
    }

    /// Why the stream ended.
    public enum CloseReason: Sendable, Equatable {
        /// The body was finished and sent.
        case finished
        /// The peer reset the stream (HTTP/2 error code) or the connection ended.
        case reset(errorCode: UInt32)
        case connectionClosed
    }

    public let eventLoop: any EventLoop
    public let highWatermark: Int
    private let sink: any HTTPResponseSink
    private let streamID: Int32
    private var closed = false
    private var waitingForRoom = false

    /// Called on the event loop when a `.full` stream has room again.
    public var onWritable: (() -> Void)?
    /// Called once on the event loop when the stream ends for any reason.
    public var onClose: ((CloseReason) -> Void)?
    /// Called when the server starts a graceful shutdown. If nil, the transport finishes the stream
    /// itself so that shutdown is not held up by a stream that never ends.
    public var onShutdown: (() -> Void)?

    init(sink: any HTTPResponseSink, streamID: Int32, eventLoop: any EventLoop, highWatermark: Int) {
        self.sink = sink
        self.streamID = streamID
        self.eventLoop = eventLoop
        self.highWatermark = highWatermark
    }

    public var isClosed: Bool {
        eventLoop.preconditionInEventLoop()
        return closed
    }

    /// Bytes queued on this stream and not yet taken into frames.
    public var bufferedBytes: Int {
        eventLoop.preconditionInEventLoop()
        return closed ? 0 : sink.bufferedBodyBytes(streamID: streamID)
    }

    /// Bytes of the whole connection waiting in the channel for the socket: bounded by the
    /// channel's writability, whatever the application writes.
    public var connectionBufferedBytes: Int {
        eventLoop.preconditionInEventLoop()
        return sink.connectionBufferedBytes
    }

    public var isWritable: Bool { !isClosed && bufferedBytes < highWatermark }

    @discardableResult
    public func write(_ buffer: ByteBuffer) -> WriteResult {
        eventLoop.preconditionInEventLoop()
        if closed { return .closed }
        if sink.bufferedBodyBytes(streamID: streamID) >= highWatermark {
            waitingForRoom = true
            return .full
        }
        return sink.writeBody(buffer, end: false, streamID: streamID) ? .accepted : .closed
    }

    /// Ends the body; the stream closes once everything queued is sent.
    public func finish() {
        eventLoop.preconditionInEventLoop()
        if closed { return }
        _ = sink.writeBody(nil, end: true, streamID: streamID)
    }

    /// Resets the stream without sending what is still queued.
    public func cancel() {
        eventLoop.preconditionInEventLoop()
        if closed { return }
        sink.cancelStream(streamID: streamID)
    }

    // MARK: From the connection handler

    func bodyDrained(remaining: Int) {
        if waitingForRoom, remaining <= highWatermark / 2 {
            waitingForRoom = false
            onWritable?()
        }
    }

    func shutdownRequested() {
        if closed { return }
        if let onShutdown {
            onShutdown()
        } else {
            finish()
        }
    }

    func streamClosed(_ reason: CloseReason) {
        if closed { return }
        closed = true
        let callback = onClose
        onClose = nil
        onWritable = nil
        onShutdown = nil
        callback?(reason)
    }
}
