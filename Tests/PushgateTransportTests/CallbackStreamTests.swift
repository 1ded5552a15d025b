import NIOConcurrencyHelpers
import NIOCore
import PushgateTransport
import Testing

/// `submit` and `submitStreaming`: requests and streamed bodies without a task per request or
/// chunk (the bench's load generator).
@Suite("HTTP/2 client: callback streams", .timeLimit(.minutes(1)))
struct CallbackStreamTests {
    @Test("chunks reach the callback on the connection's loop in order; the body's end completes `ended`")
    func chunksInOrder() async throws {
        try await withTestServer { server in
            let connection = try await server.connect()
            let (chunks, sink) = AsyncStream.makeStream(of: String.self)
            let onLoop = NIOLockedValueBox(true)
            let eventLoop = connection.channel.eventLoop
            let head = try await connection.submitStreaming(HTTPClientRequest(path: "/stream")) { chunk in
                if !eventLoop.inEventLoop { onLoop.withLockedValue { $0 = false } }
                sink.yield(String(buffer: chunk))
            }.get()
            #expect(head.status == 200)
            #expect(head.headers.first(name: "content-type") == "text/event-stream")
            let writer = try await server.hooks.streamWriter.futureResult.get()
            var received = chunks.makeAsyncIterator()
            var text = ""
            var expected = ""
            for event in ["id: 1\n\n", "id: 2\n\n"] {
                expected += event
                try await writer.eventLoop.submit { #expect(writer.write(ByteBuffer(string: event)) == .accepted) }
                    .get()
                // HTTP/2 may split or join DATA frames: compare what has arrived so far.
                while text.count < expected.count, let chunk = await received.next() { text += chunk }
                #expect(text == expected)
            }
            try await writer.eventLoop.submit { writer.finish() }.get()
            try await head.ended.get()
            #expect(onLoop.withLockedValue { $0 })
            await connection.close()
        }
    }

    @Test("a reset stream fails `ended`; the connection goes on")
    func resetFailsEnded() async throws {
        try await withTestServer { server in
            let connection = try await server.connect()
            let head = try await connection.submitStreaming(HTTPClientRequest(path: "/stream")) { _ in }.get()
            _ = try await server.hooks.streamWriter.futureResult.get()
            connection.reset(streamID: head.streamID)
            await #expect(throws: HTTP2ClientError.streamReset(errorCode: 8)) { try await head.ended.get() }
            let other = try await connection.submit(HTTPClientRequest(path: "/hello")).get()
            #expect(other.status == 200)
            #expect(String(buffer: other.body) == "hello")
            await connection.close()
        }
    }

    @Test("on a closed connection both calls fail at once with connectionClosed")
    func closedConnection() async throws {
        try await withTestServer { server in
            let connection = try await server.connect()
            await connection.close()
            await #expect(throws: HTTP2ClientError.connectionClosed) {
                try await connection.submit(HTTPClientRequest(path: "/hello")).get()
            }
            await #expect(throws: HTTP2ClientError.connectionClosed) {
                try await connection.submitStreaming(HTTPClientRequest(path: "/stream")) { _ in }.get()
            }
        }
    }

    @Test("each chunk is credited when the callback returns: a body 16 times the stream window arrives whole")
    func flowControlCredit() async throws {
        let total = 4 * 1024 * 1024
        try await withTestServer { server in
            let connection = try await server.connect()
            let received = NIOLockedValueBox(0)
            let head = try await connection.submitStreaming(HTTPClientRequest(path: "/firehose?n=\(total)")) { chunk in
                received.withLockedValue { $0 += chunk.readableBytes }
            }.get()
            server.hooks.firehoseGo.succeed()
            try await head.ended.get()
            #expect(received.withLockedValue { $0 } == total)
            await connection.close()
        }
    }
}
