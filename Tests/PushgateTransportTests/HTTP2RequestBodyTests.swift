import CNGHTTP2
import NIOCore
import NIOEmbedded
import Testing

@testable import PushgateTransport

/// What a request body may cost the HTTP/2 server before its request ends: nothing when the
/// application refuses the request on its head, no more than its route admits, and, across all
/// connections, no more than the server's budget. In `EmbeddedChannel`s, without sockets.
@Suite("HTTP/2 request bodies: admission, limits, the server's budget")
struct HTTP2RequestBodyTests {
    private static let noError = NGHTTP2_NO_ERROR.rawValue
    private static let refusedStream = NGHTTP2_REFUSED_STREAM.rawValue

    @Test(
        "a request refused on its head is answered right after HEADERS, its body never buffered; body still arriving after the answer resets the stream"
    )
    func refusedOnItsHead() throws {
        // A stream window of 16 KiB: the client sends HEADERS and a part of its 64 KiB body.
        let connection = try EmbeddedHTTP2Connection { $0.session.initialStreamWindowSize = 16 * 1024 }
        defer { connection.finish() }
        try connection.handshake()
        let stream = try connection.client.post("/refused", body: ByteBuffer(repeating: 0x41, count: 64 * 1024))
        try connection.sendClientBytes()

        let answer = try connection.serverFrames().filter { $0.streamID == UInt32(stream) && $0.kind != .windowUpdate }
        #expect(answer.map(\.kind) == [.headers, .data])
        #expect(answer[1].endStream)
        #expect(connection.client.responses[stream] == .init(status: 403, body: "refused on its head", complete: true))
        #expect(connection.application.paths.isEmpty)
        #expect(connection.handler.bufferedRequestBytes == 0)

        // The window the server gave back lets more body come: RST_STREAM(NO_ERROR) stops it.
        try connection.sendClientBytes()
        let reset = try connection.serverFrames().filter { $0.streamID == UInt32(stream) && $0.kind != .windowUpdate }
        #expect(reset.map(\.kind) == [.rstStream])
        #expect(reset.first?.resetErrorCode == Self.noError)
        #expect(connection.handler.bufferedRequestBytes == 0)

        // The connection goes on.
        let next = try connection.client.request("/hello")
        try connection.sendClientBytes()
        _ = try connection.serverFrames()
        #expect(connection.client.responses[next]?.status == 200)
    }

    @Test(
        "a body that ends right after the early answer, as curl's second TLS record does, closes the stream without a reset"
    )
    func finishedBodyAfterEarlyAnswer() throws {
        let connection = try EmbeddedHTTP2Connection()
        defer { connection.finish() }
        try connection.handshake()
        let stream = try connection.client.openPost("/refused")
        try connection.sendClientBytes()
        let answer = try connection.serverFrames().filter { $0.streamID == UInt32(stream) }
        #expect(answer.map(\.kind) == [.headers, .data])
        #expect(connection.client.responses[stream]?.complete == true)

        // The client's whole body was already on its way when the answer left.
        #expect(connection.client.sendBody(stream, ByteBuffer(repeating: 0x41, count: 100), end: true))
        try connection.sendClientBytes()
        let after = try connection.serverFrames().filter { $0.streamID == UInt32(stream) && $0.kind != .windowUpdate }
        #expect(after.isEmpty, "no RST_STREAM after a request the client finished: \(after)")
        #expect(connection.handler.earlyAnswers.isEmpty)
        #expect(connection.application.paths.isEmpty)
    }

    @Test("a body past its route's limit is answered 413 as soon as its bytes go past it, before the stream ends")
    func routeLimit() throws {
        let budget = RequestBodyBudget()
        // The window lets 16 KiB of a 64 KiB body through: the stream cannot end yet.
        let connection = try EmbeddedHTTP2Connection(bodyBudget: budget) {
            $0.session.initialStreamWindowSize = 16 * 1024
        }
        defer { connection.finish() }
        try connection.handshake()
        let stream = try connection.client.post("/limited", body: ByteBuffer(repeating: 0x41, count: 64 * 1024))
        try connection.sendClientBytes()

        // (A WINDOW_UPDATE for the bytes received may come first.)
        let frames = try connection.serverFrames().filter { $0.streamID == UInt32(stream) && $0.kind != .windowUpdate }
        #expect(frames.map(\.kind) == [.headers, .data])
        #expect(connection.client.responses[stream]?.status == 413)
        // The rest of the body, let in by the window given back, is stopped.
        try connection.sendClientBytes()
        let reset = try connection.serverFrames().filter { $0.streamID == UInt32(stream) && $0.kind != .windowUpdate }
        #expect(reset.map(\.kind) == [.rstStream])
        #expect(reset.first?.resetErrorCode == Self.noError)
        #expect(
            connection.client.responses[stream]?.body
                == "request body larger than \(HoldingApplication.limitedBodySize) bytes\n"
        )
        #expect(connection.application.paths.isEmpty)
        #expect(connection.handler.bufferedRequestBytes == 0)
        #expect(budget.heldBytes == 0)

        // Within its limit, a body is served.
        let small = try connection.client.post(
            "/limited",
            body: ByteBuffer(repeating: 0x41, count: HoldingApplication.limitedBodySize)
        )
        try connection.sendClientBytes()
        _ = try connection.serverFrames()
        #expect(connection.client.responses[small] == .init(status: 200, body: "1024 bytes", complete: true))
    }

    @Test("a route admitting more than the server's ceiling gets the ceiling")
    func serverCeiling() throws {
        let connection = try EmbeddedHTTP2Connection { $0.maxRequestBodySize = 2048 }
        defer { connection.finish() }
        try connection.handshake()
        let stream = try connection.client.post("/upload", body: ByteBuffer(repeating: 0x41, count: 4096))
        try connection.sendClientBytes()
        _ = try connection.serverFrames()
        #expect(connection.client.responses[stream]?.status == 413)
        #expect(connection.client.responses[stream]?.body == "request body larger than 2048 bytes\n")
    }

    @Test(
        "the budget is shared by connections: a body that does not fit gets REFUSED_STREAM; requests without a body are served, and bodies again once bytes are released"
    )
    func sharedBudget() throws {
        let budget = RequestBodyBudget(limit: 20 * 1024)
        let window: (inout HTTP2ServerConfiguration) -> Void = { $0.session.initialStreamWindowSize = 16 * 1024 }
        let hog = try EmbeddedHTTP2Connection(bodyBudget: budget, configure: window)
        let other = try EmbeddedHTTP2Connection(bodyBudget: budget, configure: window)
        defer {
            hog.finish()
            other.finish()
        }
        try hog.handshake()
        try other.handshake()
        // Proven: the whole budget is theirs (see unauthenticatedPart for the others).
        hog.info.markAuthenticated()
        other.info.markAuthenticated()

        // 16 KiB of a 64 KiB body arrive and wait for the rest.
        let held = try hog.client.post("/upload", body: ByteBuffer(repeating: 0x41, count: 64 * 1024))
        try hog.sendClientBytes()
        _ = try hog.serverFrames()
        #expect(budget.heldBytes == 16 * 1024)

        // 8 KiB more would go past 20 KiB: refused, unprocessed, on the other connection.
        let refused = try other.client.post("/upload", body: ByteBuffer(repeating: 0x42, count: 8 * 1024))
        try other.sendClientBytes()
        let frames = try other.serverFrames().filter { $0.streamID == UInt32(refused) && $0.kind != .windowUpdate }
        #expect(frames.map(\.kind) == [.rstStream])
        #expect(frames.first?.resetErrorCode == Self.refusedStream)
        #expect(budget.refusedBodies == 1)
        #expect(budget.heldBytes == 16 * 1024)
        let get = try other.client.request("/hello")
        try other.sendClientBytes()
        _ = try other.serverFrames()
        #expect(other.client.responses[get]?.status == 200)

        // The hog gives up its stream: its bytes go back to the budget, and the same body fits.
        hog.client.session.resetStream(held, errorCode: NGHTTP2_CANCEL.rawValue)
        try hog.sendClientBytes()
        _ = try hog.serverFrames()
        #expect(budget.heldBytes == 0)
        let retried = try other.client.post("/upload", body: ByteBuffer(repeating: 0x42, count: 8 * 1024))
        try other.sendClientBytes()
        _ = try other.serverFrames()
        #expect(other.client.responses[retried] == .init(status: 200, body: "8192 bytes", complete: true))
        #expect(budget.heldBytes == 0)
        #expect(other.application.paths == ["/hello", "/upload"])
    }

    @Test(
        "connections that have proven nothing hold a quarter of the budget at most: past it their bodies are refused, a proven connection's still fit"
    )
    func unauthenticatedPart() throws {
        let budget = RequestBodyBudget(limit: 80 * 1024)
        #expect(budget.unauthenticatedLimit == 20 * 1024)
        let window: (inout HTTP2ServerConfiguration) -> Void = { $0.session.initialStreamWindowSize = 16 * 1024 }
        let hog = try EmbeddedHTTP2Connection(bodyBudget: budget, configure: window)
        let stranger = try EmbeddedHTTP2Connection(bodyBudget: budget, configure: window)
        let provider = try EmbeddedHTTP2Connection(bodyBudget: budget, configure: window)
        defer {
            hog.finish()
            stranger.finish()
            provider.finish()
        }
        for connection in [hog, stranger, provider] { try connection.handshake() }
        provider.info.markAuthenticated()

        _ = try hog.client.post("/upload", body: ByteBuffer(repeating: 0x41, count: 64 * 1024))
        try hog.sendClientBytes()
        _ = try hog.serverFrames()
        #expect(budget.heldBytes == 16 * 1024)

        let refused = try stranger.client.post("/upload", body: ByteBuffer(repeating: 0x42, count: 8 * 1024))
        try stranger.sendClientBytes()
        let frames = try stranger.serverFrames().filter { $0.streamID == UInt32(refused) && $0.kind != .windowUpdate }
        #expect(frames.first?.resetErrorCode == Self.refusedStream)
        #expect(budget.refusedBodies == 1)

        let accepted = try provider.client.post("/upload", body: ByteBuffer(repeating: 0x43, count: 8 * 1024))
        try provider.sendClientBytes()
        _ = try provider.serverFrames()
        #expect(provider.client.responses[accepted] == .init(status: 200, body: "8192 bytes", complete: true))
        #expect(budget.refusedBodies == 1)
    }

    @Test("a connection that closes with bodies half received gives their bytes back to the budget")
    func closingReleases() throws {
        let budget = RequestBodyBudget()
        let connection = try EmbeddedHTTP2Connection(bodyBudget: budget) {
            $0.session.initialStreamWindowSize = 16 * 1024
        }
        try connection.handshake()
        for _ in 0..<3 {
            _ = try connection.client.post("/upload", body: ByteBuffer(repeating: 0x41, count: 64 * 1024))
        }
        try connection.sendClientBytes()
        _ = try connection.serverFrames()
        #expect(budget.heldBytes == 3 * 16 * 1024)
        connection.finish()
        #expect(budget.heldBytes == 0)
    }
}
