import InMemoryLogging
import Logging
import NIOCore
import PushgateTransport
import Testing

/// A connection the server cannot set up is closed, and the operator learns why: before, a socket
/// option refused by the kernel closed every connection without a word.
@Suite("Connection setup failures are logged and counted", .timeLimit(.minutes(1)))
struct ConnectionSetupTests {
    @Test("a socket option the kernel refuses closes each connection; the cause is logged once, every failure counted")
    func refusedSocketOption() async throws {
        let log = InMemoryLogHandler()
        let logger = Logger(label: "test") { _ in log }
        // No such TCP option: setsockopt fails with ENOPROTOOPT even for root.
        let refused = AcceptedSocketOption(
            level: .tcp,
            name: NIOBSDSocket.Option(rawValue: 0x7FFF),
            value: 1,
            description: "TEST_OPTION"
        )
        try await withTestServer(configure: { $0.socketOptions = [.tcpNoDelay, refused] }, logger: logger) { server in
            for _ in 0..<3 {
                let raw = try await RawConnection.connect(port: server.port, group: server.group)
                #expect(try await raw.receiveUntilClosed().readableBytes == 0, "closed before a byte was read")
            }
            #expect(server.server.connectionSetupFailures == 3)
            let lines = log.entries.filter { $0.message.description.hasPrefix("connection setup failed") }
            #expect(lines.count == 1, "\(lines)")
            #expect(lines.first?.level == .warning)
            #expect(lines.first?.metadata["error"]?.description.contains("setsockopt(TEST_OPTION)") == true, "\(lines)")
            #expect(lines.first?.metadata["connection.peer"] != nil)
        }
    }
}

/// Connection limits with real sockets: an idle connection flood from one address (security
/// review: 20,000 unauthenticated connections reached the file limit and stayed 300 s) is closed
/// on arrival past the limit, while the connections already open go on being served.
@Suite("Connection limits close connections on arrival", .timeLimit(.minutes(1)))
struct ConnectionLimitSocketTests {
    @Test("past maxPerAddress from one address: closed on arrival, counted, logged once; the open ones still served")
    func perAddress() async throws {
        let log = InMemoryLogHandler()
        let logger = Logger(label: "test") { _ in log }
        // Every client here is on loopback, which production exempts.
        var limits = ConnectionLimits(maxPerAddress: 2)
        limits.exemptsLoopback = false
        try await withTestServer(configure: { $0.connectionLimits = limits }, logger: logger) { server in
            let first = try await server.connect()
            let second = try await server.connect()
            #expect(try await first.send(HTTPClientRequest(path: "/hello")).status == 200)
            #expect(try await second.send(HTTPClientRequest(path: "/hello")).status == 200)
            for _ in 0..<3 {
                let raw = try await RawConnection.connect(port: server.port, group: server.group)
                #expect(try await raw.receiveUntilClosed().readableBytes == 0, "closed before a byte was read")
            }
            #expect(server.server.refusedConnections(.addressFull) == 3)
            #expect(server.server.refusedConnections(.serverFull) == 0)
            #expect(try await first.send(HTTPClientRequest(path: "/hello")).status == 200)
            let lines = log.entries.filter { $0.message.description.hasPrefix("connection closed on arrival") }
            #expect(lines.count == 1, "\(lines)")
            #expect(lines.first?.metadata["connection.refusal"] == "address_full")
            await first.close()
            await second.close()
        }
    }

    @Test("loopback clients are exempt from maxPerAddress by default; maxConnections still holds")
    func loopbackExemptTotalHolds() async throws {
        try await withTestServer(configure: {
            $0.connectionLimits = ConnectionLimits(maxConnections: 3, maxPerAddress: 1)
        }) { server in
            var open: [HTTP2ClientConnection] = []
            for _ in 0..<3 {
                let connection = try await server.connect()
                #expect(try await connection.send(HTTPClientRequest(path: "/hello")).status == 200)
                open.append(connection)
            }
            let raw = try await RawConnection.connect(port: server.port, group: server.group)
            #expect(try await raw.receiveUntilClosed().readableBytes == 0)
            #expect(server.server.refusedConnections(.serverFull) == 1)
            #expect(server.server.refusedConnections(.addressFull) == 0)
            for connection in open { await connection.close() }
        }
    }
}
