import COpenSSL
import NIOCore
import NIOTLS
import Testing

@testable import PushgateTLS

/// TLS 1.3 is what two OpenSSL 3 peers agree on, but the server must also serve TLS 1.2 clients, where
/// the handshake runs differently (client certificates are judged before the client finishes).
@Suite("TLSHandler with a TLS 1.2 client")
struct TLS12Tests {
    private func tls12Client(_ configuration: TLSClientConfiguration) throws -> TLSContext {
        let context = try TLSContext.client(configuration)
        try #require(SSL_CTX_ctrl(context.sslContext, SSL_CTRL_SET_MAX_PROTO_VERSION, Int(TLS1_2_VERSION), nil) == 1)
        return context
    }

    @Test func negotiatesH2AndVerifiesTheClient() throws {
        let pair = try TLSChannelPair(
            server: .server(TLSFixtures.serverConfiguration(clientCA: true)),
            client: tls12Client(TLSFixtures.clientConfiguration(certificate: "client"))
        )
        try pair.interact()

        #expect(pair.serverRecorder.events == [.handshakeCompleted(negotiatedProtocol: "h2")])
        #expect(pair.clientRecorder.events == [.handshakeCompleted(negotiatedProtocol: "h2")])
        #expect(pair.serverHandler.peerCertificate?.userID == "com.example.app")

        let payload = ByteBuffer(repeating: 0xA5, count: 1 << 20)
        pair.client.writeAndFlush(payload, promise: nil)
        pair.client.close(promise: nil)
        try pair.interact()
        #expect(pair.serverRecorder.received == payload)
        #expect(pair.serverRecorder.events.last == .shutdownCompleted)
    }

    @Test func refusedClientCertificateFailsTheClientsHandshake() throws {
        let pair = try TLSChannelPair(
            server: .server(TLSFixtures.serverConfiguration(clientCA: true)),
            client: tls12Client(TLSFixtures.clientConfiguration(certificate: "untrusted-client"))
        )
        try pair.interact()

        #expect(pair.serverRecorder.tlsErrors.first?.description.contains("certificate verify failed") == true)
        // Unlike TLS 1.3, the client never sees its handshake complete.
        #expect(pair.clientRecorder.events.isEmpty)
        #expect(pair.clientRecorder.tlsErrors.first?.description.hasPrefix("TLS handshake failed") == true)
        #expect(!pair.client.isActive && !pair.server.isActive)
    }

    @Test func serverRefusesCiphersWithoutForwardSecrecyOrAEAD() throws {
        let client = try tls12Client(TLSFixtures.clientConfiguration())
        let cbcOnly = "ECDHE-ECDSA-AES128-SHA256:ECDHE-ECDSA-AES256-SHA"
        try #require(SSL_CTX_set_cipher_list(client.sslContext, cbcOnly) == 1)
        let pair = try TLSChannelPair(server: .server(TLSFixtures.serverConfiguration()), client: client)
        try pair.interact()

        #expect(pair.serverRecorder.tlsErrors.first?.description.contains("no shared cipher") == true)
        #expect(pair.clientRecorder.events.isEmpty)
    }
}
