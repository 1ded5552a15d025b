import NIOCore

/// Where a handler's response goes: implemented by the HTTP/2 and HTTP/1.1 connection handlers.
/// Every call happens on the connection's event loop.
protocol HTTPResponseSink: AnyObject {
    func sendResponse(_ response: HTTPServerResponse, streamID: Int32)
    /// Sends the head and keeps the stream open for `writer`. False if the stream is gone.
    func startStreaming(_ head: ResponseHead, streamID: Int32, writer: ResponseBodyWriter) -> Bool
    /// Queues body bytes (and/or the end) of a streamed response. False if the stream is gone.
    func writeBody(_ buffer: ByteBuffer?, end: Bool, streamID: Int32) -> Bool
    func bufferedBodyBytes(streamID: Int32) -> Int
    /// Bytes the connection has handed to the channel and the kernel has not yet taken.
    var connectionBufferedBytes: Int { get }
    func cancelStream(streamID: Int32)
}

/// Answers one request, once, from any thread.
///
/// Calls made off the connection's event loop hop onto it; a response to a request whose stream
/// or connection has since gone away is dropped silently (the peer is no longer there to read it).
public struct HTTPResponder: Sendable {
    public let eventLoop: any EventLoop
    private let sink: NIOLoopBound<any HTTPResponseSink>
    private let streamID: Int32

    init(sink: any HTTPResponseSink, streamID: Int32, eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
        self.sink = NIOLoopBound(sink, eventLoop: eventLoop)
        self.streamID = streamID
    }

    public func respond(_ response: HTTPServerResponse) {
        if eventLoop.inEventLoop {
            sink.value.sendResponse(response, streamID: streamID)
        } else {
            let sink = self.sink
            let streamID = self.streamID
            eventLoop.execute { sink.value.sendResponse(response, streamID: streamID) }
        }
    }

    /// Sends `head` and returns a writer for a body that is produced over time (e.g. an event
    /// stream). Fails with `ResponseBodyWriter.Closed` when the stream is already gone. Over
    /// HTTP/1.1 the body goes chunked, and later requests on the connection wait for its end.
    public func startStream(
        _ head: ResponseHead,
        highWatermark: Int = 256 * 1024
    ) -> EventLoopFuture<ResponseBodyWriter> {
        if eventLoop.inEventLoop {
            return eventLoop.makeCompletedFuture(startStreamOnLoop(head, highWatermark: highWatermark))
        }
        let sink = self.sink
        let streamID = self.streamID
        return eventLoop.submit {
            try HTTPResponder(sink: sink.value, streamID: streamID, eventLoop: sink.eventLoop)
                .startStreamOnLoop(head, highWatermark: highWatermark).get()
        }
    }

    private func startStreamOnLoop(
        _ head: ResponseHead,
        highWatermark: Int
    ) -> Result<ResponseBodyWriter, any Error> {
        let writer = ResponseBodyWriter(
            sink: sink.value,
            streamID: streamID,
            eventLoop: eventLoop,
            highWatermark: highWatermark
        )
        guard sink.value.startStreaming(head, streamID: streamID, writer: writer) else {
            return .failure(ResponseBodyWriter.Closed())
        }
        return .success(writer)
    }
}
