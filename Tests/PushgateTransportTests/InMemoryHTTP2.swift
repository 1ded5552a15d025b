import CNGHTTP2
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import NIOHTTP1
import PushgateTestKit

@testable import PushgateTransport

/// The peer of a handler under test: an nghttp2 session in memory (a client for the server
/// handler, a server for the client handler), whose bytes the test carries by hand. It answers
/// PINGs and acknowledges SETTINGS by itself, as nghttp2 does.
final class InMemoryHTTP2Peer: NGHTTP2SessionDelegate {
    struct Response: Equatable {
        var status = 0
        var body = ""
        var complete = false
    }

    private(set) var session: NGHTTP2Session!
    private(set) var responses: [Int32: Response] = [:]

    init(role: NGHTTP2Session.Role = .client, limits: HTTP2SessionLimits = HTTP2SessionLimits()) throws {
        session = try NGHTTP2Session(role: role, limits: limits, delegate: self)
    }

    /// Queues a GET; its bytes leave with the next `drain`.
    func request(_ path: String) throws -> Int32 {
        let fields: HTTPHeaders = [":method": "GET", ":scheme": "http", ":authority": "localhost", ":path": path]
        let streamID = try session.submitRequest(headers: fields, body: nil)
        responses[streamID] = Response()
        return streamID
    }

    /// Queues a POST of `body`; its bytes leave with the next `drain`, as far as the server's
    /// flow-control window lets them (the rest waits, the stream still open).
    func post(_ path: String, body: ByteBuffer) throws -> Int32 {
        let fields: HTTPHeaders = [":method": "POST", ":scheme": "http", ":authority": "localhost", ":path": path]
        let streamID = try session.submitRequest(headers: fields, body: body)
        responses[streamID] = Response()
        return streamID
    }

    /// Queues the HEADERS of a POST whose body comes later, by `sendBody`.
    func openPost(_ path: String) throws -> Int32 {
        let fields: HTTPHeaders = [":method": "POST", ":scheme": "http", ":authority": "localhost", ":path": path]
        let streamID = try session.submitRequest(headers: fields, body: nil, streaming: true)
        responses[streamID] = Response()
        return streamID
    }

    /// Queues bytes of an `openPost` body; false when the stream no longer takes any.
    func sendBody(_ streamID: Int32, _ body: ByteBuffer, end: Bool) -> Bool {
        session.appendBody(streamID: streamID, body, end: end)
    }

    /// Everything the session has to send.
    func drain() throws -> ByteBuffer {
        var bytes = ByteBuffer()
        while try session.drain(into: &bytes, limit: bytes.readableBytes + 64 * 1024) {}
        return bytes
    }

    func receive(_ bytes: ByteBuffer) throws {
        try session.receive(bytes)
    }

    func sessionBeginHeaders(streamID: Int32, category: nghttp2_headers_category) -> Bool { true }

    func sessionHeader(
        streamID: Int32,
        category: nghttp2_headers_category,
        name: UnsafeBufferPointer<UInt8>,
        value: UnsafeBufferPointer<UInt8>
    ) -> Bool {
        if name.elementsEqual(":status".utf8) {
            responses[streamID, default: Response()].status = Int(String(decoding: value, as: UTF8.self)) ?? 0
        }
        return true
    }

    func sessionHeadersComplete(streamID: Int32, category: nghttp2_headers_category, endStream: Bool) {
        if endStream { responses[streamID, default: Response()].complete = true }
    }

    func sessionData(streamID: Int32, bytes: UnsafeRawBufferPointer) -> Bool {
        responses[streamID, default: Response()].body += String(decoding: bytes, as: UTF8.self)
        return true
    }

    func sessionDataFrame(streamID: Int32, endStream: Bool) {
        if endStream { responses[streamID, default: Response()].complete = true }
    }
    func sessionStreamClosed(streamID: Int32, errorCode: UInt32) {}
    func sessionGoAwayReceived(lastStreamID: Int32, errorCode: UInt32, debugData: UnsafeRawBufferPointer) {}
    func sessionPingAckReceived() {}
    func sessionSettingsReceived() {}
    func sessionBodyDrained(streamID: Int32, remaining: Int) {}
    func sessionEndStreamSent(streamID: Int32) {}
    func sessionGoAwaySent(errorCode: UInt32) {}
    func sessionWastedFrame() -> Bool { true }
}

/// Answers `/hello` at once and holds the responders of `/slow` until the test answers them;
/// on their head, refuses `/refused` (403) and admits `/limited` with a 1,024-byte body, others
/// up to the server's limit. Only used on one `EmbeddedEventLoop`'s thread.
final class HoldingApplication: HTTPServerHandler, @unchecked Sendable {
    static let limitedBodySize = 1024

    private(set) var held: [HTTPResponder] = []
    private(set) var paths: [String] = []

    func admit(_ head: HTTPServerRequest, responder: HTTPResponder) -> RequestAdmission {
        switch head.path {
        case "/refused":
            responder.respond(HTTPServerResponse(status: 403, text: "refused on its head"))
            return .answered
        case "/limited":
            return .readBody(maxBodySize: Self.limitedBodySize)
        default:
            return .readBodyUpToServerLimit
        }
    }

    func handle(_ request: HTTPServerRequest, responder: HTTPResponder) {
        paths.append(request.path)
        if request.path == "/grant" { request.connection.markAuthenticated() }
        if request.path == "/slow" {
            held.append(responder)
        } else if request.method == "POST" {
            responder.respond(HTTPServerResponse(status: 200, text: "\(request.body.readableBytes) bytes"))
        } else {
            responder.respond(HTTPServerResponse(status: 200, text: "hello"))
        }
    }

    func releaseAll() {
        let responders = held
        held = []
        for responder in responders { responder.respond(HTTPServerResponse(status: 200, text: "slow done")) }
    }
}

/// An `HTTP2ServerHandler` in an `EmbeddedChannel`, talking to an `InMemoryHTTP2Peer`: no
/// socket, and timers fire only when the test advances the loop's clock.
final class EmbeddedHTTP2Connection {
    let channel: EmbeddedChannel
    let client: InMemoryHTTP2Peer
    let application = HoldingApplication()
    let info: ConnectionInfo
    let handler: HTTP2ServerHandler
    var loop: EmbeddedEventLoop { channel.embeddedEventLoop }

    /// `bodyBudget`: give several connections one to have them share it, as a server's do.
    /// `clientLimits`: the client's SETTINGS (its windows limit what the server may send).
    /// `statistics`: where the connection counts itself, as a server's connections do.
    init(
        bodyBudget: RequestBodyBudget = RequestBodyBudget(),
        clientLimits: HTTP2SessionLimits = HTTP2SessionLimits(),
        statistics: ConnectionStatistics? = nil,
        configure: (inout HTTP2ServerConfiguration) -> Void = { _ in }
    ) throws {
        var configuration = HTTP2ServerConfiguration()
        configure(&configuration)
        let loop = EmbeddedEventLoop()
        info = ConnectionInfo(
            id: 1,
            remoteAddress: nil,
            localAddress: nil,
            httpVersion: .http2,
            isTLS: false,
            negotiatedProtocol: nil,
            peerCertificate: nil,
            eventLoop: loop,
            statistics: statistics
        )
        var logger = Logger(label: "embedded-http2")
        logger.logLevel = .critical
        handler = HTTP2ServerHandler(
            configuration: SharedHTTP2ServerConfiguration(configuration),
            application: application,
            connection: info,
            bodyBudget: bodyBudget,
            logger: logger
        )
        channel = EmbeddedChannel(handler: handler, loop: loop)
        client = try InMemoryHTTP2Peer(limits: clientLimits)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 8443)).wait()
    }

    /// Hands the server what the client has to send.
    func sendClientBytes() throws {
        let bytes = try client.drain()
        if bytes.readableBytes > 0 { try channel.writeInbound(bytes) }
    }

    /// Runs the tasks due on the loop (scheduled flushes), then takes everything the server wrote,
    /// gives it to the client and returns it as frames.
    func serverFrames() throws -> [WireFrame] {
        loop.run()
        var bytes = ByteBuffer()
        while var chunk = try channel.readOutbound(as: ByteBuffer.self) { bytes.writeBuffer(&chunk) }
        if bytes.readableBytes > 0 { try client.receive(bytes) }
        return WireFrame.parse(bytes)
    }

    /// The client's preface and SETTINGS in, the server's SETTINGS and ack out: a connection
    /// ready for requests. Returns the server's frames.
    @discardableResult
    func handshake() throws -> [WireFrame] {
        var frames = try serverFrames()
        try sendClientBytes()
        frames += try serverFrames()
        try sendClientBytes()
        return frames
    }

    /// Advances the loop's clock, firing the timers due and the flushes they schedule.
    func advance(by amount: TimeAmount) {
        loop.advanceTime(by: amount)
        loop.run()
    }

    func finish() {
        _ = try? channel.finish(acceptAlreadyClosed: true)
    }
}
