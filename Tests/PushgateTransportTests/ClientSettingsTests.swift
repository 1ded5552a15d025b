import NIOCore
import NIOPosix
import PushgateTransport
import Testing

/// The client's wait for the server's first SETTINGS, against servers that are not HTTP/2: one
/// that accepts and says nothing, one that hangs up at once.
@Suite("HTTP/2 client: waiting for the server's SETTINGS", .timeLimit(.minutes(1)))
struct ClientSettingsTests {
    /// A TCP server on an ephemeral port that keeps its connections open silently, or closes them.
    static func withRawServer(
        closeAtOnce: Bool,
        _ body: (Int, any EventLoopGroup) async throws -> Void
    ) async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let server = try await ServerBootstrap(group: group)
            .childChannelInitializer { channel in
                closeAtOnce ? channel.close() : channel.eventLoop.makeSucceededVoidFuture()
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
        "a server that hangs up before its SETTINGS: the wait fails with closedBeforeSettings, which names the likely causes"
    )
    func closingServer() async throws {
        try await Self.withRawServer(closeAtOnce: true) { port, group in
            let connection = try await HTTP2ClientConnection.connect(host: "127.0.0.1", port: port, group: group)
            await #expect(throws: HTTP2ClientError.closedBeforeSettings) {
                try await connection.waitForServerSettings()
            }
        }
        #expect(
            HTTP2ClientError.closedBeforeSettings.description.contains("TLS port spoken to in cleartext (use https://)")
        )
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
