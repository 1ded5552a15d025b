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
        let refused = AcceptedSocketOption(level: .tcp, name: NIOBSDSocket.Option(rawValue: 0x7FFF), value: 1, description: "TEST_OPTION")
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
