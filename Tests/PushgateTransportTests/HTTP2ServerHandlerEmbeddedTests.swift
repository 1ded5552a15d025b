import CNGHTTP2
import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import PushgateTestKit
import Testing

@testable import PushgateTransport

/// The HTTP/2 server handler byte for byte, in an `EmbeddedChannel` against an nghttp2 client
/// session in memory: no socket, and time moves only when the test moves it.
@Suite("HTTP/2 server handler without sockets")
struct HTTP2ServerHandlerEmbeddedTests {
    private static let settingsMaxConcurrentStreams: UInt16 = 3

    @Test("the server's SETTINGS come first; a request built by nghttp2 gets HEADERS and DATA with END_STREAM")
    func requestAndResponse() throws {
        let connection = try EmbeddedHTTP2Connection()
        defer { connection.finish() }
        let frames = try connection.handshake()
        #expect(frames.first?.kind == .settings)
        #expect(frames.first?.ack == false)
        #expect(frames.first?.settings[Self.settingsMaxConcurrentStreams] == 1000)
        #expect(frames.contains { $0.kind == .settings && $0.ack })

        let stream = try connection.client.request("/hello")
        try connection.sendClientBytes()
        let response = try connection.serverFrames().filter { $0.streamID == UInt32(stream) }
        #expect(response.map(\.kind) == [.headers, .data])
        #expect(response.last?.endStream == true)
        #expect(response.last?.payload == Array("hello".utf8))
        #expect(connection.client.responses[stream] == .init(status: 200, body: "hello", complete: true))
        #expect(connection.application.paths == ["/hello"])
        #expect(connection.channel.isActive)
    }

    @Test("behind protocol selection, the server's SETTINGS and its ack of the client's go out in one write")
    func firstFlight() throws {
        let loop = EmbeddedEventLoop()
        let channel = EmbeddedChannel(loop: loop)
        defer { _ = try? channel.finish(acceptAlreadyClosed: true) }
        var logger = Logger(label: "embedded-http2")
        logger.logLevel = .critical
        let configuration = HTTPServerConfiguration()
        try ServerConnectionPipeline(
            id: 1,
            tls: nil,
            configuration: configuration,
            http2: SharedHTTP2ServerConfiguration(configuration.http2),
            application: HoldingApplication(),
            statistics: ConnectionStatistics(),
            logger: logger
        ).configure(channel.pipeline.syncOperations, channel: channel)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 8443)).wait()
        let client = try InMemoryHTTP2Peer(limits: HTTP2SessionLimits())

        try channel.writeInbound(try client.drain())
        // One segment each way opens the connection: no write of the SETTINGS alone before.
        let first = try #require(try channel.readOutbound(as: ByteBuffer.self))
        let frames = WireFrame.parse(first)
        #expect(frames.first?.kind == .settings && frames.first?.ack == false, "\(frames)")
        #expect(frames.contains { $0.kind == .settings && $0.ack }, "\(frames)")
        loop.run()
        #expect(try channel.readOutbound(as: ByteBuffer.self) == nil)
    }

    @Test("idle for the idle timeout: GOAWAY IdleTimeout naming the last stream, then the channel closes")
    func idleTimeout() throws {
        let statistics = ConnectionStatistics()
        let connection = try EmbeddedHTTP2Connection(statistics: statistics) { $0.idleTimeout = .seconds(10) }
        defer { connection.finish() }
        try connection.handshake()
        connection.advance(by: .seconds(5))
        let stream = try connection.client.request("/hello")
        try connection.sendClientBytes()
        _ = try connection.serverFrames()

        // The idle timer starts again when the last stream closes, not when the connection opened.
        connection.advance(by: .seconds(9))
        #expect(try connection.serverFrames().isEmpty)
        #expect(connection.channel.isActive)
        #expect(statistics.timedOut(.idle) == 0)
        connection.advance(by: .seconds(1))
        #expect(statistics.timedOut(.idle) == 1)
        let goAway = try connection.serverFrames().compactMap(\.goAway)
        #expect(goAway.count == 1)
        #expect(goAway.first?.lastStreamID == UInt32(stream))
        #expect(goAway.first?.errorCode == 0)
        #expect(goAway.first?.debugData == #"{"reason":"IdleTimeout"}"#)
        #expect(!connection.channel.isActive)
    }

    /// Idle timeouts of 300 s, and 10 s until the peer is vouched for.
    private static func idlingConnection() throws -> EmbeddedHTTP2Connection {
        try EmbeddedHTTP2Connection {
            $0.idleTimeout = .seconds(300)
            $0.unauthenticatedIdleTimeout = .seconds(10)
        }
    }

    @Test("until the application vouches for the peer, the shorter unauthenticated idle timeout; then the full one")
    func unauthenticatedIdleTimeout() throws {
        let unproven = try Self.idlingConnection()
        defer { unproven.finish() }
        try unproven.handshake()
        unproven.advance(by: .seconds(9))
        #expect(unproven.channel.isActive)
        unproven.advance(by: .seconds(1))
        #expect(try unproven.serverFrames().compactMap(\.goAway).map(\.debugData) == [#"{"reason":"IdleTimeout"}"#])
        #expect(!unproven.channel.isActive)

        let proven = try Self.idlingConnection()
        defer { proven.finish() }
        try proven.handshake()
        _ = try proven.client.request("/grant")
        try proven.sendClientBytes()
        _ = try proven.serverFrames()
        proven.advance(by: .seconds(299))
        #expect(try proven.serverFrames().isEmpty)
        #expect(proven.channel.isActive)
        proven.advance(by: .seconds(1))
        #expect(try proven.serverFrames().compactMap(\.goAway).count == 1)
    }

    @Test(
        "vouched for while idle (the application says so from another thread, after the stream closed): the idle timer starts again for the full time"
    )
    func authenticatedWhileIdle() throws {
        let connection = try Self.idlingConnection()
        defer { connection.finish() }
        try connection.handshake()
        connection.advance(by: .seconds(9))
        connection.info.markAuthenticated()
        connection.advance(by: .seconds(290))
        #expect(connection.channel.isActive)
        connection.advance(by: .seconds(10))
        #expect(try connection.serverFrames().compactMap(\.goAway).count == 1)
        #expect(!connection.channel.isActive)
    }

    @Test("an open stream holds off the idle timeout")
    func openStreamIsNotIdle() throws {
        let connection = try EmbeddedHTTP2Connection { $0.idleTimeout = .seconds(10) }
        defer { connection.finish() }
        try connection.handshake()
        _ = try connection.client.request("/slow")
        try connection.sendClientBytes()
        connection.advance(by: .seconds(60))
        #expect(try connection.serverFrames().compactMap(\.goAway).isEmpty)
        #expect(connection.channel.isActive)
    }

    @Test(
        "graceful shutdown with a stream open: no GOAWAY while it is unanswered (h2 clients fail on frames after one); a stream opened meanwhile is refused; the answer, then the GOAWAY naming it, then the close"
    )
    func gracefulShutdownAfterTheAnswer() throws {
        let connection = try EmbeddedHTTP2Connection()
        defer { connection.finish() }
        try connection.handshake()
        let stream = try connection.client.request("/slow")
        try connection.sendClientBytes()
        _ = try connection.serverFrames()

        connection.channel.pipeline.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent())
        #expect(try connection.serverFrames().isEmpty)
        let late = try connection.client.request("/hello")
        try connection.sendClientBytes()
        let refused = try connection.serverFrames()
        #expect(refused.map(\.kind) == [.rstStream] && refused.first?.streamID == UInt32(late), "\(refused)")
        #expect(connection.application.paths == ["/slow"])

        connection.application.releaseAll()
        let frames = try connection.serverFrames()
        #expect(frames.map(\.kind) == [.headers, .data, .goAway])
        #expect(frames.last?.goAway?.lastStreamID == UInt32(late))
        #expect(frames.last?.goAway?.debugData == #"{"reason":"Shutdown"}"#)
        #expect(connection.client.responses[stream] == .init(status: 200, body: "slow done", complete: true))
        #expect(!connection.channel.isActive)
    }

    @Test(
        "graceful shutdown whose open stream stays unanswered: the GOAWAY after goAwayFinishTimeout, the stream still answered after it"
    )
    func gracefulShutdownOnTimeout() throws {
        let connection = try EmbeddedHTTP2Connection { $0.goAwayFinishTimeout = .seconds(2) }
        defer { connection.finish() }
        try connection.handshake()
        let stream = try connection.client.request("/slow")
        try connection.sendClientBytes()
        _ = try connection.serverFrames()

        connection.channel.pipeline.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent())
        connection.advance(by: .milliseconds(1999))
        #expect(try connection.serverFrames().isEmpty)
        connection.advance(by: .milliseconds(1))
        let final = try connection.serverFrames().compactMap(\.goAway)
        #expect(final.map(\.lastStreamID) == [UInt32(stream)])
        #expect(final.first?.debugData == #"{"reason":"Shutdown"}"#)

        connection.application.releaseAll()
        #expect(try connection.serverFrames().map(\.kind) == [.headers, .data])
        #expect(connection.client.responses[stream] == .init(status: 200, body: "slow done", complete: true))
        #expect(!connection.channel.isActive)
    }

    @Test("graceful shutdown with no stream open: the final GOAWAY at once, no PING, and the channel closes")
    func gracefulShutdownIdle() throws {
        let connection = try EmbeddedHTTP2Connection()
        defer { connection.finish() }
        try connection.handshake()
        connection.channel.pipeline.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent())
        let frames = try connection.serverFrames()
        #expect(frames.map(\.kind) == [.goAway])
        #expect(frames.first?.goAway?.lastStreamID == 0)
        #expect(frames.first?.goAway?.debugData == #"{"reason":"Shutdown"}"#)
        #expect(!connection.channel.isActive)
    }

    @Test(
        "the application's GOAWAY waits for the open stream's answer (HEADERS, DATA, then GOAWAY), carries its debug data and replaces a shutdown's"
    )
    func applicationGoAwayAfterTheAnswer() throws {
        let connection = try EmbeddedHTTP2Connection()
        defer { connection.finish() }
        try connection.handshake()
        _ = try connection.client.request("/slow")
        try connection.sendClientBytes()
        _ = try connection.serverFrames()

        connection.channel.pipeline.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent())
        connection.info.goAway(debugData: Array("TooManyErrors".utf8))
        #expect(try connection.serverFrames().isEmpty)
        connection.application.releaseAll()
        let frames = try connection.serverFrames()
        #expect(frames.map(\.kind) == [.headers, .data, .goAway])
        #expect(frames.compactMap(\.goAway).map(\.debugData) == ["TooManyErrors"])
        connection.advance(by: .seconds(10))
        #expect(try connection.serverFrames().compactMap(\.goAway).isEmpty)
    }

    @Test("a gated connection advertises one stream until the application grants it the full limit")
    func gatingAndGrant() throws {
        let connection = try EmbeddedHTTP2Connection { $0.streamsUntilAuthorized = 1 }
        defer { connection.finish() }
        let first = try connection.handshake()
        #expect(first.first?.settings[Self.settingsMaxConcurrentStreams] == 1)

        connection.info.markAuthenticated()
        let granted = try connection.serverFrames()
        #expect(granted.map(\.kind) == [.settings])
        #expect(granted.first?.settings[Self.settingsMaxConcurrentStreams] == 1000)
        connection.info.markAuthenticated()
        #expect(try connection.serverFrames().isEmpty)
    }

    @Test("a peer that reads nothing for the write stall timeout is cut off; writable again in time, it is not")
    func writeStall() throws {
        let statistics = ConnectionStatistics()
        let connection = try EmbeddedHTTP2Connection(statistics: statistics) { $0.writeStallTimeout = .seconds(30) }
        defer { connection.finish() }
        try connection.handshake()

        connection.channel.isWritable = false
        connection.channel.pipeline.fireChannelWritabilityChanged()
        connection.advance(by: .seconds(29))
        connection.channel.isWritable = true
        connection.channel.pipeline.fireChannelWritabilityChanged()
        connection.advance(by: .seconds(60))
        #expect(connection.channel.isActive)
        #expect(statistics.timedOut(.stalledReader) == 0)

        connection.channel.isWritable = false
        connection.channel.pipeline.fireChannelWritabilityChanged()
        connection.advance(by: .seconds(30))
        #expect(!connection.channel.isActive)
        #expect(statistics.timedOut(.stalledReader) == 1)
    }

    @Test("a connection error: nghttp2's GOAWAY goes out, then the channel closes")
    func connectionError() throws {
        let connection = try EmbeddedHTTP2Connection()
        defer { connection.finish() }
        try connection.handshake()
        // A HEADERS frame claiming 16 MiB on stream 0.
        try connection.channel.writeInbound(
            ByteBuffer(bytes: [0xFF, 0xFF, 0xFF, 0x01, 0x04, 0, 0, 0, 0] + Array(repeating: 0x41, count: 64))
        )
        let goAway = try connection.serverFrames().compactMap(\.goAway)
        #expect(goAway.count == 1)
        #expect(goAway.first.map { $0.errorCode != 0 } == true)
        #expect(!connection.channel.isActive)
    }

    /// POST / on stream 1 without END_STREAM: HPACK :method POST, :scheme http, :path / from
    /// the static table, :authority localhost.
    private static let openPost = WireFrame(
        type: 1,
        flags: 0x4,
        streamID: 1,
        payload: [0x83, 0x86, 0x84, 0x41, 9] + Array("localhost".utf8)
    )
    private static let enhanceYourCalm: UInt32 = 0xB

    private static func frames(_ count: Int, _ frame: (Int) -> WireFrame) -> ByteBuffer {
        ByteBuffer(bytes: (0..<count).flatMap { frame($0).bytes })
    }

    @Test(
        "empty DATA frames that do not end their stream: a thousand are taken, 33 more a second, then GOAWAY ENHANCE_YOUR_CALM, the channel closes, counted as a flood"
    )
    func emptyDataFlood() throws {
        let statistics = ConnectionStatistics()
        let connection = try EmbeddedHTTP2Connection(statistics: statistics)
        defer { connection.finish() }
        try connection.handshake()
        let empty = WireFrame(type: 0, flags: 0, streamID: 1, payload: [])
        try connection.channel.writeInbound(ByteBuffer(bytes: Self.openPost.bytes))
        try connection.channel.writeInbound(Self.frames(1000) { _ in empty })
        // Three seconds give back 99.
        connection.advance(by: .seconds(3))
        try connection.channel.writeInbound(Self.frames(99) { _ in empty })
        #expect(try connection.serverFrames().compactMap(\.goAway).isEmpty)
        #expect(connection.channel.isActive)
        #expect(statistics.floodClosures == 0)
        try connection.channel.writeInbound(Self.frames(1) { _ in empty })
        let goAway = try connection.serverFrames().compactMap(\.goAway)
        #expect(goAway.map(\.errorCode) == [Self.enhanceYourCalm])
        #expect(!connection.channel.isActive)
        #expect(statistics.floodClosures == 1)
    }

    @Test(
        "streams opened with an empty header block: each is reset, and past a thousand the connection ends with ENHANCE_YOUR_CALM, counted as a flood"
    )
    func emptyHeadersFlood() throws {
        let statistics = ConnectionStatistics()
        let connection = try EmbeddedHTTP2Connection(statistics: statistics)
        defer { connection.finish() }
        try connection.handshake()
        let emptyHeaders = { (index: Int) in
            WireFrame(type: 1, flags: 0x5, streamID: UInt32(2 * index + 1), payload: [])
        }
        try connection.channel.writeInbound(Self.frames(900, emptyHeaders))
        let answers = try connection.serverFrames()
        #expect(answers.filter { $0.kind == .rstStream }.count == 900)
        #expect(answers.compactMap(\.goAway).isEmpty)
        try connection.channel.writeInbound(Self.frames(1000) { emptyHeaders(900 + $0) })
        #expect(try connection.serverFrames().compactMap(\.goAway).map(\.errorCode) == [Self.enhanceYourCalm])
        #expect(!connection.channel.isActive)
        #expect(statistics.floodClosures == 1)
    }

    @Test(
        "rapid reset: requests opened and reset at once; past nghttp2's limit (1,000, then 33 a second) it sends GOAWAY INTERNAL_ERROR, counted as a flood"
    )
    func rapidReset() throws {
        let statistics = ConnectionStatistics()
        let connection = try EmbeddedHTTP2Connection(statistics: statistics)
        defer { connection.finish() }
        try connection.handshake()
        let openAndReset = { (index: Int) -> [WireFrame] in
            let stream = UInt32(2 * index + 1)
            return [
                WireFrame(type: 1, flags: 0x4, streamID: stream, payload: Self.openPost.payload),
                WireFrame(type: 3, flags: 0, streamID: stream, payload: [0, 0, 0, 8]),
            ]
        }
        try connection.channel.writeInbound(ByteBuffer(bytes: (0..<900).flatMap(openAndReset).flatMap(\.bytes)))
        #expect(try connection.serverFrames().compactMap(\.goAway).isEmpty)
        #expect(statistics.floodClosures == 0)
        try connection.channel.writeInbound(ByteBuffer(bytes: (900..<1200).flatMap(openAndReset).flatMap(\.bytes)))
        connection.loop.run()
        #expect(try connection.serverFrames().compactMap(\.goAway).map(\.errorCode) == [2])
        #expect(statistics.floodClosures == 1)
    }

    @Test("a connection nghttp2 ends on a protocol error takes its open streams off the streams gauge")
    func streamsGaugeAfterProtocolError() throws {
        let statistics = ConnectionStatistics()
        let connection = try EmbeddedHTTP2Connection(statistics: statistics)
        defer { connection.finish() }
        try connection.handshake()
        let heads = (0..<3).map {
            WireFrame(type: 1, flags: 0x4, streamID: UInt32(2 * $0 + 1), payload: Self.openPost.payload)
        }
        try connection.channel.writeInbound(ByteBuffer(bytes: heads.flatMap(\.bytes)))
        #expect(statistics.openStreams == 3)
        // DATA on stream 0: a connection error (PROTOCOL_ERROR).
        try connection.channel.writeInbound(
            ByteBuffer(bytes: WireFrame(type: 0, flags: 0, streamID: 0, payload: [0]).bytes)
        )
        connection.loop.run()
        #expect(!connection.channel.isActive)
        #expect(statistics.openStreams == 0)
    }

    @Test(
        "PINGs whose acks the peer does not read: past nghttp2's 1,000 queued acks the connection closes, counted as a flood"
    )
    func pingFlood() throws {
        let statistics = ConnectionStatistics()
        let connection = try EmbeddedHTTP2Connection(statistics: statistics)
        defer { connection.finish() }
        try connection.handshake()
        try connection.channel.writeInbound(
            Self.frames(2000) { _ in WireFrame(type: 6, flags: 0, streamID: 0, payload: Array("abusive!".utf8)) }
        )
        connection.loop.run()
        #expect(!connection.channel.isActive)
        #expect(statistics.floodClosures == 1)
    }

    @Test("bytes that are not the client preface: nghttp2 refuses them and the channel closes")
    func badPreface() throws {
        let connection = try EmbeddedHTTP2Connection()
        defer { connection.finish() }
        try connection.channel.writeInbound(ByteBuffer(string: "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"))
        connection.loop.run()
        #expect(!connection.channel.isActive)
    }

    // Found by fuzzing (Tests/Fuzz, http2-server): the request timer waited for every request
    // still in `requests`, answered and reset ones too, whose streams close only when the peer
    // lets them; armed again for a deadline already past, it fired on every turn of the event
    // loop (on a real loop, a core spinning for as long as the peer holds the stream).
    @Test("a request answered on its head whose answer waits for the client's window arms no request timer")
    func answeredRequestArmsNoTimer() throws {
        let outcome = Self.returns(within: 20) { () throws -> (timer: Bool, onlyHeaders: Bool, active: Bool) in
            var client = HTTP2SessionLimits()
            client.initialStreamWindowSize = 0
            let connection = try EmbeddedHTTP2Connection(clientLimits: client) {
                $0.session.initialStreamWindowSize = 0
            }
            defer { connection.finish() }
            try connection.handshake()
            let stream = try connection.client.post("/refused", body: ByteBuffer(repeating: 0x41, count: 1024))
            try connection.sendClientBytes()
            let frames = try connection.serverFrames().filter { $0.streamID == UInt32(stream) }
            connection.advance(by: .seconds(31))
            return (
                connection.handler.requestTimer != nil, frames.map(\.kind) == [.headers], connection.channel.isActive
            )
        }
        let result = try #require(
            outcome,
            "moving the clock past the request timeout did not return: the timer fires again and again"
        )
        let (timer, onlyHeaders, active) = try result.get()
        #expect(onlyHeaders, "the 403's body waits for the client's window")
        #expect(!timer)
        #expect(active)
    }

    @Test(
        "a request reset at the request timeout while the peer reads nothing arms no timer again; its RST_STREAM leaves once the channel is writable"
    )
    func resetRequestArmsNoTimer() throws {
        let statistics = ConnectionStatistics()
        let outcome = Self.returns(within: 20) { () throws -> (timer: Bool, reset: UInt32?) in
            // The window lets 16 KiB of a 64 KiB body through: the request stays arriving.
            let connection = try EmbeddedHTTP2Connection(statistics: statistics) {
                $0.session.initialStreamWindowSize = 16 * 1024
            }
            defer { connection.finish() }
            try connection.handshake()
            let stream = try connection.client.post("/upload", body: ByteBuffer(repeating: 0x41, count: 64 * 1024))
            try connection.sendClientBytes()
            _ = try connection.serverFrames()
            connection.channel.isWritable = false
            connection.channel.pipeline.fireChannelWritabilityChanged()
            connection.advance(by: .seconds(31))
            let timer = connection.handler.requestTimer != nil
            connection.channel.isWritable = true
            connection.channel.pipeline.fireChannelWritabilityChanged()
            let reset = try connection.serverFrames().first { $0.streamID == UInt32(stream) && $0.kind == .rstStream }
            return (timer, reset?.resetErrorCode)
        }
        let result = try #require(
            outcome,
            "moving the clock past the request timeout did not return: the timer fires again and again"
        )
        let (timer, reset) = try result.get()
        #expect(!timer)
        #expect(reset == NGHTTP2_CANCEL.rawValue)
        #expect(statistics.timedOut(.request) == 1 && statistics.timedOut(.idle) == 0)
    }

    /// Runs `body` on a thread of its own (an EmbeddedEventLoop belongs to the thread that made
    /// it) and returns what it returned, or nil if it has not returned within `seconds`: a timer
    /// that keeps firing keeps `advanceTime` from ever returning, and the test must fail, not hang.
    private static func returns<T: Sendable>(
        within seconds: Int,
        _ body: @escaping @Sendable () throws -> T
    ) -> Result<T, any Error>? {
        let result = NIOLockedValueBox<Result<T, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        Thread {
            result.withLockedValue { $0 = Result { try body() } }
            done.signal()
        }.start()
        guard done.wait(timeout: .now() + .seconds(seconds)) == .success else { return nil }
        return result.withLockedValue { $0 }
    }
}
