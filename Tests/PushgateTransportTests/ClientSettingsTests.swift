import NIOCore
import NIOPosix
import PushgateTransport
import Testing

/// The client's wait for the server's first SETTINGS, against servers that are not HTTP/2: one
/// that accepts and says nothing, one that hangs up at once.
@Suite("HTTP/2 client: waiting for the server's SETTINGS", .timeLimit(.minutes(1)))
struct ClientSettingsTests {
    /// A TCP server on an ephemeral port that keeps its connections open silently, or closes
    /// them, or answers `answer` to the first bytes it reads and closes.
    static func withRawServer(
        closeAtOnce: Bool,
        answer: String? = nil,
        _ body: (Int, any EventLoopGroup) async throws -> Void
    ) async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let server = try await ServerBootstrap(group: group)
            .childChannelInitializer { channel in
                if let answer { return channel.pipeline.addHandler(Answering(answer)) }
                return closeAtOnce ? channel.close() : channel.eventLoop.makeSucceededVoidFuture()
            }
            .bind(host: "127.0.0.1", port: 0).get()
        let port = try #require(server.localAddress?.port)
        do {
            try await body(port, group)
        } catch {
            try? await server.close()
            try? await group.shutdownGracefully()
            throw error
        }
        try await server.close()
        try await group.shutdownGracefully()
    }

    @Test("a server that sends nothing: the wait fails with noSettings after the timeout, and the connection is closed")
    func silentServer() async throws {
        try await Self.withRawServer(closeAtOnce: false) { port, group in
            let connection = try await HTTP2ClientConnection.connect(
                host: "127.0.0.1",
                port: port,
                settingsTimeout: .milliseconds(100),
                group: group
            )
            await #expect(throws: HTTP2ClientError.noSettings(within: .milliseconds(100))) {
                try await connection.waitForServerSettings()
            }
            try await connection.channel.closeFuture.get()
        }
    }

    @Test("noSettings says how long the client waited")
    func noSettingsDescription() {
        #expect(HTTP2ClientError.noSettings(within: .milliseconds(100)).description.contains("within 0.1 s"))
    }

    @Test(
        "a server that hangs up without a byte (and is no TLS server either): the wait fails with closedWithoutAnswer, which names the likely causes"
    )
    func closingServer() async throws {
        try await Self.withRawServer(closeAtOnce: true) { port, group in
            let connection = try await HTTP2ClientConnection.connect(host: "127.0.0.1", port: port, group: group)
            await #expect(throws: HTTP2ClientError.closedWithoutAnswer) {
                try await connection.waitForServerSettings()
            }
        }
        #expect(HTTP2ClientError.closedWithoutAnswer.description.contains("a server refusing connections"))
    }

    @Test("an HTTP/1 server's answer to the preface: http1Answer with its status line, not a bad frame")
    func http1Server() async throws {
        let answer = "HTTP/1.1 400 Bad Request\r\nconnection: close\r\n\r\n"
        try await Self.withRawServer(closeAtOnce: false, answer: answer) { port, group in
            let connection = try await HTTP2ClientConnection.connect(host: "127.0.0.1", port: port, group: group)
            await #expect(
                throws: HTTP2ClientError.http1Answer(
                    host: "127.0.0.1",
                    port: port,
                    statusLine: "HTTP/1.1 400 Bad Request"
                )
            ) {
                _ = try await connection.send(HTTPClientRequest(path: "/healthz"))
            }
        }
    }

    @Test(
        "cleartext to a TLS server, which drops the preface without a word: tlsPort, every time; TLS to a cleartext HTTP/1 server: cleartextPort with its answer"
    )
    func mixedUpSchemes() async throws {
        try await withTestServer(tls: [try Fixtures.serverContext()], cleartext: false) { server in
            for _ in 0..<5 {
                let connection = try await server.connect(tls: nil)
                await #expect(throws: HTTP2ClientError.tlsPort(host: "127.0.0.1", port: server.port)) {
                    _ = try await connection.send(HTTPClientRequest(path: "/healthz"))
                }
            }
        }
        let answer = "HTTP/1.1 400 Bad Request\r\nconnection: close\r\n\r\n"
        try await Self.withRawServer(closeAtOnce: false, answer: answer) { port, group in
            for _ in 0..<5 {
                let connection = try await HTTP2ClientConnection.connect(
                    host: "127.0.0.1",
                    port: port,
                    tls: try Fixtures.clientContext(),
                    group: group
                )
                await #expect(
                    throws: HTTP2ClientError.cleartextPort(
                        host: "127.0.0.1",
                        port: port,
                        answer: "HTTP/1.1 400 Bad Request"
                    )
                ) {
                    try await connection.waitForServerSettings()
                }
            }
        }
    }

    @Test("nothing listening: the connect fails with the host, the port and the reason, not NIO's nested text")
    func nothingListening() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        await #expect(throws: HTTP2ClientError.cannotConnect(host: "127.0.0.1", port: 1, reason: "connection refused"))
        {
            _ = try await HTTP2ClientConnection.connect(host: "127.0.0.1", port: 1, group: group)
        }
        #expect(
            HTTP2ClientError.cannotConnect(host: "127.0.0.1", port: 1, reason: "connection refused").description
                == "cannot connect to 127.0.0.1:1: connection refused"
        )
        try await group.shutdownGracefully()
    }

    @Test(
        "a TLS server whose certificate the client does not trust: the wait fails with the handshake's own error, not a bare close"
    )
    func untrustedServer() async throws {
        try await withTestServer(tls: [try Fixtures.serverContext()], cleartext: false) { server in
            let connection = try await server.connect(tls: try Fixtures.clientContext(trustRoots: "other-ca.pem"))
            do {
                try await connection.waitForServerSettings()
                Issue.record("the client trusted a certificate of another CA")
            } catch {
                #expect("\(error)".contains("certificate verify failed"), "\(error)")
            }
        }
    }
}

/// Answers the first bytes it reads with a fixed text, then closes.
private final class Answering: ChannelInboundHandler, Sendable {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    let answer: String

    init(_ answer: String) { self.answer = answer }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        context.writeAndFlush(wrapOutboundOut(ByteBuffer(string: answer))).whenComplete { _ in
            context.close(promise: nil)
        }
    }
}
