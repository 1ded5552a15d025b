import CNGHTTP2
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import NIOHTTP1
@testable import PushgateTransport

/// One HTTP/2 frame as it went over the wire.
struct WireFrame: Equatable, CustomStringConvertible {
    enum Kind: UInt8 {
        case data = 0, headers = 1, rstStream = 3, settings = 4, ping = 6, goAway = 7, windowUpdate = 8
    }

    var type: UInt8
    var flags: UInt8
    var streamID: UInt32
    var payload: [UInt8]

    var kind: Kind? { Kind(rawValue: type) }
    var endStream: Bool { flags & 0x1 != 0 }
    /// SETTINGS and PING: this frame acknowledges the peer's.
    var ack: Bool { flags & 0x1 != 0 }

    /// GOAWAY's last stream ID, error code and debug data.
    var goAway: (lastStreamID: UInt32, errorCode: UInt32, debugData: String)? {
        guard kind == .goAway, payload.count >= 8 else { return nil }
        var buffer = ByteBuffer(bytes: payload)
        let last = buffer.readInteger(as: UInt32.self)! & 0x7FFF_FFFF
        let code = buffer.readInteger(as: UInt32.self)!
        return (last, code, buffer.readString(length: buffer.readableBytes)!)
    }

    /// SETTINGS entries, identifier to value.
    var settings: [UInt16: UInt32] {
        guard kind == .settings else { return [:] }
        var buffer = ByteBuffer(bytes: payload)
        var entries: [UInt16: UInt32] = [:]
        while let id = buffer.readInteger(as: UInt16.self), let value = buffer.readInteger(as: UInt32.self) {
            entries[id] = value
        }
        return entries
    }

    var description: String { "\(kind.map { "\($0)" } ?? "type \(type)") flags=\(flags) stream=\(streamID) \(payload.count) bytes" }

    /// Splits bytes into frames; they must end on a frame boundary.
    static func parse(_ bytes: ByteBuffer) -> [WireFrame] {
        var bytes = bytes
        var frames: [WireFrame] = []
        while bytes.readableBytes >= 9 {
            let length = Int(bytes.readInteger(as: UInt16.self)!) << 8 | Int(bytes.readInteger(as: UInt8.self)!)
            let type = bytes.readInteger(as: UInt8.self)!
            let flags = bytes.readInteger(as: UInt8.self)!
            let streamID = bytes.readInteger(as: UInt32.self)! & 0x7FFF_FFFF
            frames.append(WireFrame(type: type, flags: flags, streamID: streamID, payload: bytes.readBytes(length: length)!))
        }
        precondition(bytes.readableBytes == 0, "bytes left after the last whole frame")
        return frames
    }
}

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

    init(role: NGHTTP2Session.Role = .client) throws {
        session = try NGHTTP2Session(role: role, limits: HTTP2SessionLimits(), delegate: self)
    }

    /// Queues a GET; its bytes leave with the next `drain`.
    func request(_ path: String) throws -> Int32 {
        let fields: HTTPHeaders = [":method": "GET", ":scheme": "http", ":authority": "localhost", ":path": path]
        let streamID = try session.submitRequest(headers: fields, body: nil)
        responses[streamID] = Response()
        return streamID
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

    func sessionDataEnded(streamID: Int32) { responses[streamID, default: Response()].complete = true }
    func sessionStreamClosed(streamID: Int32, errorCode: UInt32) {}
    func sessionGoAwayReceived(lastStreamID: Int32, errorCode: UInt32, debugData: UnsafeRawBufferPointer) {}
    func sessionPingAckReceived() {}
    func sessionSettingsReceived() {}
    func sessionBodyDrained(streamID: Int32, remaining: Int) {}
    func sessionEndStreamSent(streamID: Int32) {}
}

/// Answers `/hello` at once and holds the responders of `/slow` until the test answers them.
/// Only used on one `EmbeddedEventLoop`'s thread.
final class HoldingApplication: HTTPServerHandler, @unchecked Sendable {
    private(set) var held: [HTTPResponder] = []
    private(set) var paths: [String] = []

    func handle(_ request: HTTPServerRequest, responder: HTTPResponder) {
        paths.append(request.path)
        if request.path == "/slow" {
            held.append(responder)
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
    var loop: EmbeddedEventLoop { channel.embeddedEventLoop }

    init(configure: (inout HTTP2ServerConfiguration) -> Void = { _ in }) throws {
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
            eventLoop: loop
        )
        var logger = Logger(label: "embedded-http2")
        logger.logLevel = .critical
        let handler = HTTP2ServerHandler(
            configuration: SharedHTTP2ServerConfiguration(configuration),
            application: application,
            connection: info,
            logger: logger
        )
        channel = EmbeddedChannel(handler: handler, loop: loop)
        client = try InMemoryHTTP2Peer()
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
