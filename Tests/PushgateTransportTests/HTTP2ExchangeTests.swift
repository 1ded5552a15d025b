import NIOCore
import NIOHTTP1
import PushgateTransport
import Testing

@Suite("HTTP/2 exchanges over real sockets", .timeLimit(.minutes(2)))
struct HTTP2ExchangeTests {
    @Test("2,000 concurrent requests on one connection, more than the 1,000-stream limit")
    func manyConcurrentStreams() async throws {
        try await withTestServer { server in
            let connection = try await server.connect()
            let statuses = try await withThrowingTaskGroup(of: (Int, String).self) { group in
                for i in 0..<2000 {
                    group.addTask {
                        let path = i % 2 == 0 ? "/hello" : "/bytes?n=\(i)"
                        let response = try await connection.send(HTTPClientRequest(path: path))
                        let expected = i % 2 == 0 ? "hello" : String(buffer: TestApplication.pattern(i))
                        return (response.status, String(buffer: response.body) == expected ? "ok" : "mismatch \(i)")
                    }
                }
                var results: [(Int, String)] = []
                for try await result in group { results.append(result) }
                return results
            }
            #expect(statuses.count == 2000)
            #expect(statuses.allSatisfy { $0.0 == 200 && $0.1 == "ok" })
            await connection.close()
        }
    }

    @Test("4 MiB request and response bodies")
    func largeBodiesBothWays() async throws {
        try await withTestServer(configure: { $0.http2.maxRequestBodySize = 8 * 1024 * 1024 }) { server in
            let connection = try await server.connect()
            let upload = TestApplication.pattern(4 * 1024 * 1024)
            let echoed = try await connection.send(HTTPClientRequest(method: "POST", path: "/echo", body: upload))
            #expect(echoed.status == 200)
            #expect(echoed.body == upload)
            let download = try await connection.send(HTTPClientRequest(path: "/bytes?n=\(4 * 1024 * 1024)"))
            #expect(download.body == upload)
            await connection.close()
        }
    }

    @Test("a request body over the limit gets 413 and the connection keeps working")
    func requestBodyOverLimit() async throws {
        try await withTestServer(configure: { $0.http2.maxRequestBodySize = 1024 }) { server in
            let connection = try await server.connect()
            let response = try await connection.send(
                HTTPClientRequest(method: "POST", path: "/echo", body: TestApplication.pattern(64 * 1024))
            )
            #expect(response.status == 413)
            #expect(String(buffer: response.body).contains("larger than 1024 bytes"))
            let next = try await connection.send(HTTPClientRequest(path: "/hello"))
            #expect(next.status == 200)
            await connection.close()
        }
    }

    @Test("a long-lived response sends chunks as the application produces them")
    func streamedResponse() async throws {
        try await withTestServer { server in
            let connection = try await server.connect()
            let response = try await connection.stream(HTTPClientRequest(path: "/stream"))
            #expect(response.status == 200)
            #expect(response.headers.first(name: "content-type") == "text/event-stream")
            let writer = try await server.hooks.streamWriter.futureResult.get()
            var body = response.body.makeAsyncIterator()

            for event in ["id: 1\n\n", "id: 2\n\n"] {
                try await writer.eventLoop.submit { #expect(writer.write(ByteBuffer(string: event)) == .accepted) }
                    .get()
                let chunk = try await body.next()
                #expect(chunk.map { String(buffer: $0) } == event)
            }
            try await writer.eventLoop.submit { writer.finish() }.get()
            #expect(try await body.next() == nil)
            #expect(try await server.hooks.streamClosed.futureResult.get() == .finished)
            await connection.close()
        }
    }

    @Test("a peer resetting a stream mid-response closes only that stream")
    func peerResetsStream() async throws {
        try await withTestServer { server in
            let connection = try await server.connect()
            let response = try await connection.stream(HTTPClientRequest(path: "/stream"))
            let writer = try await server.hooks.streamWriter.futureResult.get()
            try await writer.eventLoop.submit { _ = writer.write(ByteBuffer(string: "first\n")) }.get()
            var body = response.body.makeAsyncIterator()
            _ = try await body.next()

            connection.reset(streamID: response.streamID)
            let reason = try await server.hooks.streamClosed.futureResult.get()
            #expect(reason == .reset(errorCode: 8))  // CANCEL
            let afterReset = try await writer.eventLoop.submit { writer.write(ByteBuffer(string: "late\n")) }.get()
            #expect(afterReset == .closed)

            let other = try await connection.send(HTTPClientRequest(path: "/hello"))
            #expect(other.status == 200)
            await connection.close()
        }
    }

    @Test("graceful shutdown: GOAWAY, in-flight requests finish, new ones are refused")
    func goAwayDuringShutdown() async throws {
        try await withTestServer { server in
            let connection = try await server.connect()
            let inFlight = (0..<5).map { _ in
                Task { try await connection.send(HTTPClientRequest(path: "/slow")) }
            }
            try await server.hooks.waitForSlowRequests(5, on: server.group.next())

            let shutdown = Task { await server.server.shutdownGracefully(deadline: .seconds(30)) }
            // The first GOAWAY is nghttp2's shutdown notice (no debug data); the final one names
            // the reason (next test).
            let goAway = try await connection.goAwayReceived.get()
            #expect(goAway.errorCode == 0)  // NO_ERROR

            server.hooks.releaseSlowRequests()
            for request in inFlight {
                let response = try await request.value
                #expect(response.status == 200)
                #expect(String(buffer: response.body) == "slow done")
            }
            await shutdown.value
            #expect(server.server.openConnections == 0)
            await #expect(throws: (any Error).self) {
                try await connection.send(HTTPClientRequest(path: "/hello"))
            }
        }
    }

    @Test("shutting down, the final GOAWAY carries APNs' JSON reason Shutdown")
    func goAwayReasonShutdown() async throws {
        try await withTestServer { server in
            let connection = try await server.connect()
            #expect(try await connection.send(HTTPClientRequest(path: "/hello")).status == 200)
            let shutdown = Task { await server.server.shutdownGracefully(deadline: .seconds(30)) }
            let goAway = try await connection.goAwayReceived.get()
            #expect(goAway.errorCode == 0)
            #expect(goAway.debugData == #"{"reason":"Shutdown"}"#)
            await shutdown.value
        }
    }

    @Test("a peer that stops reading does not make the server buffer without bound")
    func stalledReaderIsBounded() async throws {
        let total = 64 * 1024 * 1024
        try await withTestServer { server in
            var limits = HTTP2SessionLimits()
            // Flow control must not be what stops the server: only the peer's not reading.
            limits.initialStreamWindowSize = Int32.max
            limits.connectionWindowSize = Int32.max
            let connection = try await HTTP2ClientConnection.connect(
                host: "127.0.0.1",
                port: server.port,
                limits: limits,
                group: server.group
            )
            let response = try await connection.stream(HTTPClientRequest(path: "/firehose?n=\(total)"))
            try await connection.channel.setOption(ChannelOptions.autoRead, value: false).get()
            server.hooks.firehoseGo.succeed()

            try await server.hooks.firehoseBlocked.futureResult.get()
            let whileStalled = server.hooks.firehose.withLockedValue { $0 }
            #expect(whileStalled.accepted < total)
            #expect(whileStalled.maxStreamBuffered <= 256 * 1024 + 16 * 1024)
            #expect(whileStalled.maxConnectionBuffered <= 512 * 1024)

            try await connection.channel.setOption(ChannelOptions.autoRead, value: true).get()
            connection.channel.read()
            var received = 0
            for try await chunk in response.body { received += chunk.readableBytes }
            #expect(received == total)
            let final = try await server.hooks.firehoseDone.futureResult.get()
            #expect(final.accepted == total)
            #expect(final.maxStreamBuffered <= 256 * 1024 + 16 * 1024)
            #expect(final.maxConnectionBuffered <= 512 * 1024)
            await connection.close()
        }
    }
}

@Suite("HTTP/2 connection limits", .timeLimit(.minutes(1)))
struct HTTP2LimitTests {
    @Test("an idle connection gets GOAWAY with an IdleTimeout reason and is closed")
    func idleTimeout() async throws {
        try await withTestServer(configure: { $0.http2.idleTimeout = .milliseconds(200) }) { server in
            let connection = try await server.connect()
            let goAway = try await connection.goAwayReceived.get()
            #expect(goAway.errorCode == 0)
            #expect(goAway.debugData == #"{"reason":"IdleTimeout"}"#)
            try await connection.channel.closeFuture.get()
        }
    }

    @Test("a gated connection may open one stream until the application grants it the full limit")
    func streamGating() async throws {
        try await withTestServer(configure: { $0.http2.streamsUntilAuthorized = 1 }) { server in
            let connection = try await server.connect()
            #expect(try await connection.send(HTTPClientRequest(method: "GET", path: "/hello")).status == 200)
            #expect(try await connection.serverMaxConcurrentStreams() == 1)
            #expect(try await connection.send(HTTPClientRequest(method: "GET", path: "/grant")).status == 200)
            #expect(try await connection.serverMaxConcurrentStreams() == 1000)

            // While gated, requests beyond the limit wait in the client for their turn once it
            // has seen the SETTINGS (before that, a racing client gets REFUSED_STREAM, as from
            // APNs).
            let queued = try await server.connect()
            try await queued.waitForServerSettings()
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<20 {
                    group.addTask { try await queued.send(HTTPClientRequest(method: "GET", path: "/hello")).status }
                }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            #expect(statuses == Array(repeating: 200, count: 20))
            #expect(try await queued.serverMaxConcurrentStreams() == 1)
            await connection.close()
            await queued.close()
        }
    }

    @Test("the application can end a connection with GOAWAY carrying its debug data (APNs' reason JSON)")
    func goAwayWithReason() async throws {
        try await withTestServer { server in
            let connection = try await server.connect()
            let response = try await connection.send(HTTPClientRequest(method: "GET", path: "/goaway?d=TooManyErrors"))
            #expect(response.status == 200)
            let goAway = try await connection.goAwayReceived.get()
            #expect(goAway.errorCode == 0)
            #expect(goAway.debugData == "TooManyErrors")
            try await connection.channel.closeFuture.get()
        }
    }

    @Test("a header list over the limit is answered 431 on its stream; the connection goes on")
    func oversizedHeaderList() async throws {
        try await withTestServer { server in
            let connection = try await server.connect()
            let huge = String(repeating: "a", count: 40 * 1024)
            let refused = try await connection.send(HTTPClientRequest(path: "/hello", headers: ["x-huge": huge]))
            #expect(refused.status == 431)
            let text = String(buffer: refused.body)
            #expect(text.contains("the request's header fields come to more than 32768 bytes"), "\(text)")
            // Fields after the limit are decoded, not kept: the HPACK table stays in step.
            let split = try await connection.send(
                HTTPClientRequest(
                    path: "/hello",
                    headers: [
                        "x-a": String(repeating: "b", count: 20 * 1024),
                        "x-b": String(repeating: "c", count: 20 * 1024), "x-after": "d",
                    ]
                )
            )
            #expect(split.status == 431)
            #expect(try await connection.send(HTTPClientRequest(path: "/hello")).status == 200)
            await connection.close()
        }
    }
}
