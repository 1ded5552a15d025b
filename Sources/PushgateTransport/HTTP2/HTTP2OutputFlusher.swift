import NIOCore

/// Told by an `HTTP2OutputFlusher` when it closes the channel on its own account.
protocol HTTP2OutputFlusherDelegate: AnyObject {
    /// The session is done (`error` nil: nghttp2 wants neither to read nor to write) or could not
    /// serialize (`error`): the flusher is closing the channel and will send nothing more.
    func outputClosing(after error: (any Error)?)
}

/// Moves the frames an nghttp2 session serializes into the channel, for the server and the
/// client alike: in chunks, only while the channel is writable, coalescing the flushes asked for
/// while a read is being processed or within one event-loop tick; and closes the channel once
/// nghttp2 has nothing left to read or write.
///
/// A class, not a value in its handler: writing re-enters it (writability changes, and nghttp2's
/// callbacks reach the application, which asks for more flushes), and a mutating method of a
/// value stored in the handler would be an overlapping access.
final class HTTP2OutputFlusher {
    private let session: NGHTTP2Session
    private var context: ChannelHandlerContext?
    /// The handler owns the flusher and outlives it in use: `tearDown` runs before it goes.
    private unowned(unsafe) let delegate: any HTTP2OutputFlusherDelegate
    private let chunkSize: Int
    private let closeTimeout: TimeAmount

    /// Inside `receive`: nghttp2's callbacks may ask for a flush, which waits for the end of the
    /// read (the handler flushes in `channelReadComplete`), so that one read's responses leave
    /// in one write.
    private var receiving = false
    private var flushScheduled = false
    private var flushing = false
    private var flushAgain = false
    private var closeTimer: Scheduled<Void>?
    /// Closing or closed: nothing more is written.
    private var isClosed = false

    /// - Parameter chunkSize: serialized frames go to the channel in chunks of at most this many
    ///   bytes; its writability between chunks bounds the output held in memory.
    /// - Parameter closeTimeout: how long the last bytes get to leave before the channel is cut.
    init(
        session: NGHTTP2Session,
        context: ChannelHandlerContext,
        chunkSize: Int,
        closeTimeout: TimeAmount,
        delegate: any HTTP2OutputFlusherDelegate
    ) {
        self.session = session
        self.context = context
        self.chunkSize = chunkSize
        self.closeTimeout = closeTimeout
        self.delegate = delegate
    }

    /// Feeds received bytes to the session (see `NGHTTP2Session.receive`).
    func receive(_ buffer: ByteBuffer) throws {
        receiving = true
        defer { receiving = false }
        try session.receive(buffer)
    }

    /// Serializes pending frames into the channel while it is writable. When nghttp2 has nothing
    /// left to read or write (GOAWAY exchanged, last stream done), closes the channel once the
    /// final bytes are written. Never called from inside an nghttp2 callback.
    ///
    /// Writing can change writability synchronously, which calls back in here: a nested call
    /// only asks the running one to go round again, so bytes leave in the order nghttp2 made them.
    func flush() {
        guard let context, !isClosed, !receiving else { return }
        if flushing {
            flushAgain = true
            return
        }
        flushing = true
        defer { flushing = false }
        repeat {
            flushAgain = false
            do {
                while context.channel.isWritable, !isClosed {
                    var buffer = context.channel.allocator.buffer(capacity: 1024)
                    let more = try session.drain(into: &buffer, limit: chunkSize)
                    // Flushing each chunk lets a TLS handler below encrypt and send it now, so the
                    // channel's writability reflects it before the next chunk is serialized.
                    if buffer.readableBytes > 0 { context.writeAndFlush(NIOAny(buffer), promise: nil) }
                    if !more { break }
                }
            } catch {
                isClosed = true
                delegate.outputClosing(after: error)
                context.close(promise: nil)
                return
            }
        } while flushAgain && !isClosed
        guard !isClosed, !session.wantsRead, !session.wantsWrite else { return }
        delegate.outputClosing(after: nil)
        closeWhenWritten(context.channel.allocator.buffer(capacity: 0), context: context)
    }

    /// Coalesces flushes asked for outside a read: many responses completing in one event-loop
    /// tick go out in one write.
    func scheduleFlush() {
        guard let context, !flushScheduled, !receiving, !isClosed else { return }
        flushScheduled = true
        let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
        context.eventLoop.execute {
            let flusher = loopBound.value
            flusher.flushScheduled = false
            flusher.flush()
        }
    }

    /// Sends whatever nghttp2 still has queued (e.g. the GOAWAY for a protocol error), writable
    /// channel or not, then closes. Never called from inside an nghttp2 callback.
    func closeAfterFlush() {
        guard let context, !isClosed else { return }
        var buffer = context.channel.allocator.buffer(capacity: 256)
        // A fatal session error leaves nghttp2 unable to serialize more; send what it produced.
        while (try? session.drain(into: &buffer, limit: buffer.readableBytes + chunkSize)) == true {}
        closeWhenWritten(buffer, context: context)
    }

    /// The channel is gone (inactive or the handler removed).
    func tearDown() {
        closeTimer?.cancel()
        closeTimer = nil
        isClosed = true
        context = nil
    }

    /// Closing fails writes still queued in the channel: close once the last bytes are out, or
    /// after `closeTimeout` if the peer does not take them.
    private func closeWhenWritten(_ buffer: ByteBuffer, context: ChannelHandlerContext) {
        isClosed = true
        let written = context.eventLoop.makePromise(of: Void.self)
        context.writeAndFlush(NIOAny(buffer), promise: written)
        let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        closeTimer = context.eventLoop.scheduleTask(in: closeTimeout) {
            loopBound.value.close(promise: nil)
        }
        written.futureResult.whenComplete { _ in loopBound.value.close(promise: nil) }
    }
}

@available(*, unavailable)
extension HTTP2OutputFlusher: Sendable {}
