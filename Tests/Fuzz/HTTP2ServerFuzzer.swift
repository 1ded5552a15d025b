// Fuzz target 6: the HTTP/2 server's input path (Tests/Fuzz/run.sh http2-server): bytes from a
// client into the nghttp2-backed server handler, the request assembly above it and the gateway's
// provider and device routes answering (FuzzGateway.swift), on an EmbeddedChannel.
//
// Input: a chunk size byte (0: all at once), then everything the client sends after its
// connection preface, which the harness sends first. The seeds are connections made by Python's
// h2 (Tests/Fuzz/make-seeds.py): a push with a provider token, an event stream with pushes and
// an ack, every device request, refusals. After the bytes, the loop's clock moves past the
// request timeout and the idle timeout, then the channel is closed.
//
// Checked beyond "does not crash" (and ASan, and LeakSanitizer after each input): the server
// writes whole frames, SETTINGS first.
import Foundation
import NIOCore
import NIOEmbedded

@testable import PushgateTransport

private let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var reader = FuzzReader(UnsafeBufferPointer(start: data, count: size))
    let selector = Int(reader.byte())
    let input = preface + reader.rest()
    let chunkSize = selector == 0 ? input.count : selector

    let loop = EmbeddedEventLoop()
    let core = FuzzGateway.core(on: loop)
    var configuration = HTTP2ServerConfiguration()
    // As on a gateway with provider keys: one stream until the connection proves who it is.
    configuration.streamsUntilAuthorized = 1
    let connection = ConnectionInfo(
        id: 1,
        remoteAddress: nil,
        localAddress: nil,
        httpVersion: .http2,
        isTLS: false,
        negotiatedProtocol: nil,
        peerCertificate: nil,
        eventLoop: loop
    )
    let handler = HTTP2ServerHandler(
        configuration: SharedHTTP2ServerConfiguration(configuration),
        application: FuzzGateway.router(core: core),
        connection: connection,
        bodyBudget: RequestBodyBudget(),
        logger: FuzzGateway.quiet
    )
    let channel = EmbeddedChannel(handler: handler, loop: loop)
    var output: [UInt8] = []
    func collect() {
        loop.run()
        while let buffer = try? channel.readOutbound(as: ByteBuffer.self) { output += buffer.readableBytesView }
    }
    do {
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 2197)).wait()
    } catch {
        fail("connect: \(error)")
    }
    collect()
    var start = 0
    while start < input.count, channel.isActive {
        let end = min(start + chunkSize, input.count)
        _ = try? channel.writeInbound(ByteBuffer(bytes: input[start..<end]))
        collect()
        start = end
    }
    for seconds in [31, 301] where channel.isActive {
        loop.advanceTime(by: .seconds(Int64(seconds)))
        collect()
    }
    _ = try? channel.close().wait()
    collect()
    _ = try? channel.finish()
    try? loop.syncShutdownGracefully()
    checkFrames(output)
    return 0
}

/// The bytes are whole frames (9-byte header, then its length), the first of them SETTINGS.
private func checkFrames(_ bytes: [UInt8]) {
    check(
        bytes.count >= 9 && bytes[3] == 0x4 && bytes[4] & 0x1 == 0,
        "the server's first frame is not its SETTINGS: \(bytes.prefix(9))"
    )
    var offset = 0
    while offset + 9 <= bytes.count {
        let length = Int(bytes[offset]) << 16 | Int(bytes[offset + 1]) << 8 | Int(bytes[offset + 2])
        offset += 9 + length
    }
    check(offset == bytes.count, "the server's output ends inside a frame (\(offset) of \(bytes.count) bytes)")
}
