import NIOCore
import NIOEmbedded
import PushgateTLS
import Testing

/// A client whose server answers its ClientHello in cleartext (https:// given for a cleartext
/// port): the handshake fails as `notTLS` with the start of the answer, not OpenSSL's "wrong
/// version number".
@Suite("TLSHandler: a cleartext answer to the ClientHello")
struct TLSNotTLSAnswerTests {
    /// What a client handler reports when `answer` comes back to its ClientHello.
    private func failure(answering answer: [UInt8]) throws -> (errors: [TLSError], channel: EmbeddedChannel) {
        let channel = EmbeddedChannel()
        let recorder = EventRecorder()
        try channel.pipeline.syncOperations.addHandler(
            TLSHandler(context: try TLSContext.client(TLSFixtures.clientConfiguration()))
        )
        try channel.pipeline.syncOperations.addHandler(recorder)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
        let hello = try #require(try channel.readOutbound(as: ByteBuffer.self))
        #expect(hello.readableBytesView.first == 22, "a ClientHello went out")
        try channel.writeInbound(ByteBuffer(bytes: answer))
        return (recorder.tlsErrors, channel)
    }

    @Test("an HTTP/1.1 status line: notTLS with the line")
    func http1() throws {
        let (errors, channel) = try failure(
            answering: Array("HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n".utf8)
        )
        #expect(errors.map(\.kind) == [.notTLS(answer: "HTTP/1.1 400 Bad Request")])
        #expect(
            errors.first?.description
                == #"the server answered in cleartext, not TLS (its answer began "HTTP/1.1 400 Bad Request")"#
        )
        #expect(!channel.isActive)
    }

    @Test("an HTTP/2 SETTINGS frame: notTLS, its bytes escaped")
    func http2() throws {
        let (errors, _) = try failure(answering: [0, 0, 0, 4, 0, 0, 0, 0, 0])
        #expect(errors.map(\.kind) == [.notTLS(answer: #"\x00\x00\x00\x04\x00\x00\x00\x00\x00"#)])
    }

    @Test("a TLS alert is TLS: OpenSSL's own failure, refusedByPeer, not notTLS")
    func alert() throws {
        // A fatal handshake_failure alert (40) in a TLS 1.2 record.
        let (errors, _) = try failure(answering: [21, 3, 3, 0, 2, 2, 40])
        #expect(errors.count == 1)
        #expect(errors.first?.kind == .refusedByPeer, "\(errors)")
        #expect(errors.first?.description.contains("alert handshake failure") == true, "\(errors)")
    }
}
