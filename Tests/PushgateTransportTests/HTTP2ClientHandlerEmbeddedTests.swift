import NIOCore
import NIOEmbedded
import Testing

@testable import PushgateTransport

/// The HTTP/2 client handler in an `EmbeddedChannel` against an nghttp2 server session in memory.
@Suite("HTTP/2 client handler without sockets")
struct HTTP2ClientHandlerEmbeddedTests {
    @Test("a GOAWAY with no stream open leaves nghttp2 nothing to do: the client closes the connection")
    func closesWhenDone() throws {
        let connection = try EmbeddedHTTP2ClientConnection()
        defer { connection.finish() }
        connection.server.session.submitGoAway(lastStreamID: 0, errorCode: 0)
        try connection.sendServerBytes()
        #expect(try connection.handler.goAwayFuture.wait().lastStreamID == 0)
        #expect(!connection.channel.isActive)
    }

    @Test("a GOAWAY with a stream open: the response still arrives, then the client closes the connection")
    func closesAfterTheLastStream() throws {
        let connection = try EmbeddedHTTP2ClientConnection()
        defer { connection.finish() }
        let response = connection.loop.makePromise(of: HTTPClientResponse.self)
        connection.handler.send(HTTPClientRequest(path: "/hello"), promise: response)
        try connection.server.receive(connection.clientBytes())

        connection.server.session.submitGoAway(lastStreamID: 1, errorCode: 0)
        try connection.sendServerBytes()
        #expect(connection.channel.isActive)

        try connection.server.session.submitResponse(
            streamID: 1,
            status: 200,
            headers: [:],
            body: ByteBuffer(string: "hello"),
            streaming: false
        )
        try connection.sendServerBytes()
        let answer = try response.futureResult.wait()
        #expect(answer.status == 200)
        #expect(String(buffer: answer.body) == "hello")
        #expect(!connection.channel.isActive)
    }
}

/// An `HTTP2ClientHandler` in an `EmbeddedChannel`, its preface and SETTINGS already taken by an
/// `InMemoryHTTP2Peer` server.
private final class EmbeddedHTTP2ClientConnection {
    let loop = EmbeddedEventLoop()
    let handler: HTTP2ClientHandler
    let channel: EmbeddedChannel
    let server: InMemoryHTTP2Peer

    init() throws {
        handler = HTTP2ClientHandler(
            host: "127.0.0.1",
            port: 443,
            limits: HTTP2SessionLimits(),
            maxResponseBodySize: 1024,
            settingsTimeout: .seconds(10),
            eventLoop: loop
        )
        channel = EmbeddedChannel(handler: handler, loop: loop)
        server = try InMemoryHTTP2Peer(role: .server)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
        try server.receive(clientBytes())
    }

    /// Runs the flushes due, then takes everything the client wrote.
    func clientBytes() throws -> ByteBuffer {
        loop.run()
        var bytes = ByteBuffer()
        while var chunk = try channel.readOutbound(as: ByteBuffer.self) { bytes.writeBuffer(&chunk) }
        return bytes
    }

    /// What the server has to send in, the client's answer back.
    func sendServerBytes() throws {
        try channel.writeInbound(server.drain())
        try server.receive(clientBytes())
    }

    func finish() {
        _ = try? channel.finish(acceptAlreadyClosed: true)
    }
}
