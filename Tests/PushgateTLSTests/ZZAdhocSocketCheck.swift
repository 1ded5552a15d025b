import Foundation
import NIOCore
import NIOPosix
import NIOTLS
import PushgateTLS
import Testing

final class EchoUpper: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    let handler: TLSHandler
    init(_ h: TLSHandler) { handler = h }
    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        print("SERVER EVENT", event, "proto", handler.negotiatedProtocol as Any, "peer", handler.peerCertificate?.subject as Any)
        context.fireUserInboundEventTriggered(event)
    }
    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let b = unwrapInboundIn(data)
        print("SERVER READ", b.readableBytes)
        var out = context.channel.allocator.buffer(string: "echo:")
        out.writeImmutableBuffer(b)
        context.writeAndFlush(wrapOutboundOut(out), promise: nil)
    }
    func errorCaught(context: ChannelHandlerContext, error: any Error) { print("SERVER ERROR", error) }
}

@Test func adhocOpenSSLCLI() async throws {
    let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    let ctx = try TLSContext.server(TLSFixtures.serverConfiguration(clientCA: true))
    let server = try await ServerBootstrap(group: group)
        .childChannelInitializer { ch in
            ch.eventLoop.makeCompletedFuture {
                let h = TLSHandler(context: ctx)
                try ch.pipeline.syncOperations.addHandlers([h, EchoUpper(h)])
            }
        }
        .bind(host: "127.0.0.1", port: 0).get()
    let port = server.localAddress!.port!
    for args in [["-alpn", "h2,http/1.1"], ["-tls1_2", "-alpn", "http/1.1", "-cert", TLSFixtures.path("client.pem"), "-key", TLSFixtures.path("client-key.pem")], ["-tls1_2", "-cert", TLSFixtures.path("untrusted-client.pem"), "-key", TLSFixtures.path("untrusted-client-key.pem")]] {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/timeout")
        p.arguments = ["8", "openssl", "s_client", "-connect", "127.0.0.1:\(port)", "-CAfile", TLSFixtures.path("ca.pem"), "-servername", "localhost", "-verify_return_error"] + args
        let inPipe = Pipe(); let outPipe = Pipe()
        p.standardInput = inPipe; p.standardOutput = outPipe; p.standardError = outPipe
        try p.run()
        inPipe.fileHandleForWriting.write(String(repeating: "x", count: 100_000).data(using: .utf8)! + "hello\n".data(using: .utf8)!)
        try await Task.sleep(for: .seconds(1))
        try inPipe.fileHandleForWriting.close()
        while p.isRunning { try await Task.sleep(for: .milliseconds(100)) }
        let out = String(decoding: outPipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        print("---- s_client", args)
        print(out.split(separator: "\n").filter { $0.contains("ALPN") || $0.contains("Protocol") || $0.contains("Cipher") || $0.contains("echo") || $0.contains("error") || $0.contains("Verify") || $0.contains("alert") }.map { String($0.prefix(200)) }.joined(separator: "\n"))
    }
    try await server.close()
    try await group.shutdownGracefully()
}
