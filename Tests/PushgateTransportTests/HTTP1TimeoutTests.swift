import Logging
import NIOCore
import NIOEmbedded
import Testing

@testable import PushgateTransport

/// HTTP/1.1's timers in an `EmbeddedChannel`: time moves only when the test moves it.
@Suite("HTTP/1.1 idle and request timeouts without sockets")
struct HTTP1TimeoutTests {
    private final class Connection {
        let channel: EmbeddedChannel
        let info: ConnectionInfo
        let statistics = ConnectionStatistics()

        init(configure: (inout HTTPServerConfiguration) -> Void) throws {
            var configuration = HTTPServerConfiguration()
            configuration.http2.idleTimeout = .seconds(300)
            configuration.http2.unauthenticatedIdleTimeout = .seconds(10)
            configuration.http2.requestTimeout = .seconds(30)
            configure(&configuration)
            let loop = EmbeddedEventLoop()
            info = ConnectionInfo(
                id: 1,
                remoteAddress: nil,
                localAddress: nil,
                httpVersion: .http1_1,
                isTLS: false,
                negotiatedProtocol: nil,
                peerCertificate: nil,
                eventLoop: loop
            )
            var logger = Logger(label: "embedded-http1")
            logger.logLevel = .critical
            channel = EmbeddedChannel(loop: loop)
            try channel.pipeline.syncOperations.addHandlers(
                ServerConnectionPipeline.http1Handlers(
                    connection: info,
                    configuration: configuration,
                    application: HoldingApplication(),
                    statistics: statistics,
                    logger: logger
                )
            )
            try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 80)).wait()
        }

        func send(_ text: String) throws { try channel.writeInbound(ByteBuffer(string: text)) }

        func advance(by amount: TimeAmount) { channel.embeddedEventLoop.advanceTime(by: amount) }

        func finish() { _ = try? channel.finish() }
    }

    @Test(
        "a connection that has sent nothing, or only requests that proved nothing, closes after the unauthenticated idle timeout"
    )
    func unauthenticatedIdle() throws {
        let silent = try Connection { _ in }
        defer { silent.finish() }
        silent.advance(by: .seconds(9))
        #expect(silent.channel.isActive)
        #expect(silent.statistics.timedOut(.idle) == 0)
        silent.advance(by: .seconds(1))
        #expect(!silent.channel.isActive)
        #expect(silent.statistics.timedOut(.idle) == 1)

        let proven = try Connection { _ in }
        defer { proven.finish() }
        try proven.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
        proven.info.markAuthenticated()
        try proven.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
        proven.advance(by: .seconds(299))
        #expect(proven.channel.isActive)
        proven.advance(by: .seconds(1))
        #expect(!proven.channel.isActive)
    }

    @Test(
        "a body that trickles in (slowloris) is cut off at the request timeout, though each chunk restarts the idle timer"
    )
    func slowBody() throws {
        let connection = try Connection { $0.http2.unauthenticatedIdleTimeout = nil }
        defer { connection.finish() }
        try connection.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n")
        for _ in 0..<29 {
            try connection.send("a")
            connection.advance(by: .seconds(1))
        }
        #expect(connection.channel.isActive)
        try connection.send("a")
        connection.advance(by: .seconds(1))
        #expect(!connection.channel.isActive)
        #expect(connection.statistics.timedOut(.request) == 1 && connection.statistics.timedOut(.idle) == 0)
    }

    @Test("a request that ends in time leaves the connection to its idle timeout")
    func bodyInTime() throws {
        let connection = try Connection { $0.http2.unauthenticatedIdleTimeout = nil }
        defer { connection.finish() }
        try connection.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\na")
        connection.advance(by: .seconds(20))
        try connection.send("b")
        connection.advance(by: .seconds(20))
        #expect(connection.channel.isActive)
        let response = try connection.channel.readOutbound(as: ByteBuffer.self).map { String(buffer: $0) } ?? ""
        #expect(response.hasPrefix("HTTP/1.1 200"), "\(response)")
        connection.advance(by: .seconds(280))
        #expect(!connection.channel.isActive)
        #expect(connection.statistics.timedOut(.request) == 0 && connection.statistics.timedOut(.idle) == 1)
    }
}
