import NIOCore
import NIOEmbedded
import NIOTLS
import PushgateTLS
import Testing

@Suite("TLSHandler: handshake and ALPN")
struct TLSHandlerHandshakeTests {
    @Test func negotiatesH2OnBothSides() throws {
        let pair = try TLSChannelPair(
            server: .server(TLSFixtures.serverConfiguration()),
            client: .client(TLSFixtures.clientConfiguration())
        )
        try pair.interact()

        #expect(pair.serverRecorder.events == [.handshakeCompleted(negotiatedProtocol: "h2")])
        #expect(pair.clientRecorder.events == [.handshakeCompleted(negotiatedProtocol: "h2")])
        #expect(pair.serverHandler.negotiatedProtocol == "h2")
        #expect(pair.clientHandler.negotiatedProtocol == "h2")
        #expect(pair.serverRecorder.errors.isEmpty)
        #expect(pair.clientRecorder.errors.isEmpty)
        #expect(pair.client.isActive && pair.server.isActive)
        // The client verified the server; the server asked for no client certificate.
        #expect(pair.clientHandler.peerCertificate?.commonName == "localhost")
        #expect(pair.clientHandler.peerCertificate?.der == (try TLSFixtures.der(ofPEM: "server.pem")))
        #expect(pair.serverHandler.peerCertificate == nil)
    }

    @Test func clientHandlerAddedBeforeActiveStartsOnChannelActive() throws {
        let pair = try TLSChannelPair(
            server: .server(TLSFixtures.serverConfiguration()),
            client: .client(TLSFixtures.clientConfiguration()),
            clientAddedBeforeActive: true
        )
        try pair.interact()

        #expect(pair.clientRecorder.events == [.handshakeCompleted(negotiatedProtocol: "h2")])
        #expect(pair.serverRecorder.events == [.handshakeCompleted(negotiatedProtocol: "h2")])
    }

    @Test func serverWaitsForClientHello() throws {
        let server = EmbeddedChannel()
        try server.pipeline.syncOperations.addHandler(TLSHandler(context: .server(TLSFixtures.serverConfiguration())))
        try server.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()

        #expect(try server.readOutbound(as: ByteBuffer.self) == nil)
    }

    @Test(
        "The server picks its own favourite among what the client offers",
        arguments: [
            (["http/1.1"], "http/1.1"),
            (["http/1.1", "h2"], "h2"),
            (["spdy/3", "http/1.1"], "http/1.1"),
        ] as [([String], String)]
    )
    func serverPreferenceWins(offered: [String], expected: String) throws {
        let pair = try TLSChannelPair(
            server: .server(TLSFixtures.serverConfiguration()),
            client: .client(TLSFixtures.clientConfiguration(alpnProtocols: offered))
        )
        try pair.interact()

        #expect(pair.serverHandler.negotiatedProtocol == expected)
        #expect(pair.clientHandler.negotiatedProtocol == expected)
        #expect(pair.clientRecorder.events == [.handshakeCompleted(negotiatedProtocol: expected)])
    }

    @Test(
        "No ALPN agreed, handshake still succeeds",
        arguments: [[], ["spdy/3", "acme-tls/1"]] as [[String]]
    )
    func noCommonProtocol(offered: [String]) throws {
        let pair = try TLSChannelPair(
            server: .server(TLSFixtures.serverConfiguration()),
            client: .client(TLSFixtures.clientConfiguration(alpnProtocols: offered))
        )
        try pair.interact()

        #expect(pair.serverHandler.negotiatedProtocol == nil)
        #expect(pair.clientHandler.negotiatedProtocol == nil)
        #expect(pair.serverRecorder.events == [.handshakeCompleted(negotiatedProtocol: nil)])
        #expect(pair.clientRecorder.events == [.handshakeCompleted(negotiatedProtocol: nil)])
        #expect(pair.serverRecorder.errors.isEmpty && pair.clientRecorder.errors.isEmpty)
    }

    @Test func serverWithoutALPNIgnoresTheOffer() throws {
        let pair = try TLSChannelPair(
            server: .server(TLSFixtures.serverConfiguration(alpnProtocols: [])),
            client: .client(TLSFixtures.clientConfiguration())
        )
        try pair.interact()

        #expect(pair.clientRecorder.events == [.handshakeCompleted(negotiatedProtocol: nil)])
    }
}

@Suite("TLSHandler: verifying the server")
struct TLSHandlerServerVerificationTests {
    @Test(arguments: ["localhost", "127.0.0.1", "::1"])
    func acceptsNamesInTheCertificate(serverName: String) throws {
        let pair = try TLSChannelPair(
            server: .server(TLSFixtures.serverConfiguration()),
            client: .client(TLSFixtures.clientConfiguration(serverName: serverName))
        )
        try pair.interact()

        #expect(pair.clientRecorder.errors.isEmpty)
        #expect(pair.clientRecorder.events == [.handshakeCompleted(negotiatedProtocol: "h2")])
    }

    @Test(
        arguments: [
            ("push.example.com", "hostname mismatch"),
            ("10.0.0.1", "IP address mismatch"),
        ]
    )
    func refusesNamesNotInTheCertificate(serverName: String, reason: String) throws {
        let pair = try TLSChannelPair(
            server: .server(TLSFixtures.serverConfiguration()),
            client: .client(TLSFixtures.clientConfiguration(serverName: serverName))
        )
        try pair.interact()

        #expect(pair.clientRecorder.events.isEmpty)
        #expect(pair.clientRecorder.tlsErrors.count == 1)
        #expect(pair.clientRecorder.tlsErrors.first?.description.contains(reason) == true)
        #expect(pair.clientRecorder.tlsErrors.first?.kind == .peerCertificate)
        #expect(!pair.client.isActive)
        #expect(!pair.server.isActive)
        #expect(pair.serverRecorder.events.isEmpty)
    }

    @Test func handlerServerNameOverridesTheConfiguration() throws {
        let pair = try TLSChannelPair(
            server: .server(TLSFixtures.serverConfiguration()),
            client: .client(TLSFixtures.clientConfiguration(serverName: "localhost")),
            clientServerName: "push.example.com"
        )
        try pair.interact()

        #expect(pair.clientRecorder.tlsErrors.first?.description.contains("hostname mismatch") == true)
    }

    @Test func unusableServerNameClosesTheChannel() throws {
        let client = EmbeddedChannel()
        let recorder = EventRecorder()
        try client.pipeline.syncOperations.addHandler(recorder)
        try client.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
        // SNI allows at most 255 bytes.
        let handler = TLSHandler(
            context: try .client(TLSFixtures.clientConfiguration()),
            serverName: String(repeating: "a", count: 300) + ".example"
        )
        try client.pipeline.syncOperations.addHandler(handler, position: .first)

        #expect(recorder.tlsErrors.first?.message.contains("as TLS server name (SNI)") == true)
        #expect(!client.isActive)
        #expect(try client.readOutbound(as: ByteBuffer.self) == nil)
    }

    @Test func refusesAServerFromAnotherCA() throws {
        let pair = try TLSChannelPair(
            server: .server(TLSFixtures.serverConfiguration()),
            client: .client(TLSFixtures.clientConfiguration(trustRoots: "other-ca.pem"))
        )
        try pair.interact()

        let error = try #require(pair.clientRecorder.tlsErrors.first)
        #expect(error.description.contains("certificate verify failed"))
        // The server sends its CA along (server-chain.pem), which the client does not trust.
        #expect(error.description.contains("self-signed certificate in certificate chain"))
        #expect(error.kind == .peerCertificate)
        #expect(pair.clientRecorder.events.isEmpty)
        #expect(!pair.client.isActive)
    }

    @Test func withoutVerificationConnectsButReportsNoCertificate() throws {
        let pair = try TLSChannelPair(
            server: .server(TLSFixtures.serverConfiguration()),
            client: .client(TLSFixtures.clientConfiguration(trustRoots: "other-ca.pem", verifyPeer: false))
        )
        try pair.interact()

        #expect(pair.clientRecorder.events == [.handshakeCompleted(negotiatedProtocol: "h2")])
        #expect(pair.clientHandler.peerCertificate == nil)
    }
}

@Suite("TLSHandler: client certificates")
struct TLSHandlerClientCertificateTests {
    @Test func acceptsAClientCertificateFromTheClientCA() throws {
        let pair = try TLSChannelPair(
            server: .server(TLSFixtures.serverConfiguration(clientCA: true)),
            client: .client(TLSFixtures.clientConfiguration(certificate: "client"))
        )
        try pair.interact()

        #expect(pair.serverRecorder.events == [.handshakeCompleted(negotiatedProtocol: "h2")])
        #expect(pair.serverRecorder.errors.isEmpty && pair.clientRecorder.errors.isEmpty)
        let certificate = try #require(pair.serverHandler.peerCertificate)
        #expect(certificate.userID == "com.example.app")
        #expect(certificate.commonName == "Apple Push Services: com.example.app")
        #expect(
            certificate.subject
                == "UID=com.example.app,CN=Apple Push Services: com.example.app,OU=TEAM123456,O=Example Inc,C=US"
        )
        #expect(certificate.serialNumberHex == "5EED0003")
        #expect(certificate.der == (try TLSFixtures.der(ofPEM: "client.pem")))
        // Issued for 36500 days: it expires after 2100-01-01T00:00:00Z.
        #expect((certificate.notAfter ?? 0) > 4_102_444_800)
    }

    @Test func refusesAClientCertificateFromAnotherCA() throws {
        let pair = try TLSChannelPair(
            server: .server(TLSFixtures.serverConfiguration(clientCA: true)),
            client: .client(TLSFixtures.clientConfiguration(certificate: "untrusted-client"))
        )
        try pair.interact()

        let error = try #require(pair.serverRecorder.tlsErrors.first)
        #expect(pair.serverRecorder.errors.count == 1)
        #expect(error.description.contains("certificate verify failed"))
        #expect(error.description.contains("peer certificate: unable to get local issuer certificate"))
        #expect(pair.serverRecorder.events.isEmpty)
        #expect(pair.serverHandler.peerCertificate == nil)
        #expect(!pair.server.isActive)
        // With TLS 1.3 the client has finished its side before the server judges its certificate, so
        // it learns of the refusal from the server's alert, after its own handshakeCompleted.
        #expect(pair.clientRecorder.tlsErrors.first?.description.contains("alert") == true)
        #expect(pair.clientRecorder.tlsErrors.first?.kind == .refusedByPeer)
        #expect(!pair.client.isActive)
    }

    @Test func acceptsAClientWithoutCertificateWhenNotRequired() throws {
        let pair = try TLSChannelPair(
            server: .server(TLSFixtures.serverConfiguration(clientCA: true)),
            client: .client(TLSFixtures.clientConfiguration())
        )
        try pair.interact()

        #expect(pair.serverRecorder.events == [.handshakeCompleted(negotiatedProtocol: "h2")])
        #expect(pair.serverRecorder.errors.isEmpty && pair.clientRecorder.errors.isEmpty)
        #expect(pair.serverHandler.peerCertificate == nil)
        #expect(pair.server.isActive && pair.client.isActive)
    }

    @Test func refusesAClientWithoutCertificateWhenRequired() throws {
        let pair = try TLSChannelPair(
            server: .server(TLSFixtures.serverConfiguration(clientCA: true, requireClientCertificate: true)),
            client: .client(TLSFixtures.clientConfiguration())
        )
        try pair.interact()

        let error = try #require(pair.serverRecorder.tlsErrors.first)
        #expect(error.description.contains("peer did not return a certificate"))
        #expect(pair.serverRecorder.events.isEmpty)
        #expect(!pair.server.isActive)
        #expect(pair.clientRecorder.tlsErrors.first?.description.contains("alert") == true)
        #expect(pair.clientRecorder.tlsErrors.first?.kind == .refusedByPeer)
        #expect(!pair.client.isActive)
    }

    @Test func requiredClientCertificateIsAccepted() throws {
        let pair = try TLSChannelPair(
            server: .server(TLSFixtures.serverConfiguration(clientCA: true, requireClientCertificate: true)),
            client: .client(TLSFixtures.clientConfiguration(certificate: "client"))
        )
        try pair.interact()

        #expect(pair.serverHandler.peerCertificate?.userID == "com.example.app")
        #expect(pair.server.isActive && pair.client.isActive)
    }
}

@Suite("TLSHandler: application data and closing")
struct TLSHandlerDataTests {
    private func handshaken() throws -> TLSChannelPair {
        let pair = try TLSChannelPair(
            server: .server(TLSFixtures.serverConfiguration()),
            client: .client(TLSFixtures.clientConfiguration())
        )
        try pair.interact()
        try #require(pair.clientRecorder.events == [.handshakeCompleted(negotiatedProtocol: "h2")])
        return pair
    }

    @Test func carriesDataBothWays() throws {
        let pair = try handshaken()
        let clientWrite = Outcome(pair.client.writeAndFlush(ByteBuffer(string: "ping from client")))
        let serverWrite = Outcome(pair.server.writeAndFlush(ByteBuffer(string: "pong from server")))
        try pair.interact()

        #expect(pair.serverRecorder.received == ByteBuffer(string: "ping from client"))
        #expect(pair.clientRecorder.received == ByteBuffer(string: "pong from server"))
        #expect(clientWrite.succeeded && serverWrite.succeeded)
        #expect(pair.serverRecorder.readCompleteCount > 0)
    }

    @Test func carriesOneMebibyteBothWays() throws {
        let pair = try handshaken()
        let upload = ByteBuffer(bytes: (0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) })
        let download = ByteBuffer(bytes: (0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ 1) })
        let uploadWrite = Outcome(pair.client.writeAndFlush(upload))
        let downloadWrite = Outcome(pair.server.writeAndFlush(download))
        try pair.interact()

        #expect(pair.serverRecorder.received.readableBytes == 1 << 20)
        #expect(pair.serverRecorder.received == upload)
        #expect(pair.clientRecorder.received == download)
        #expect(uploadWrite.succeeded && downloadWrite.succeeded)
    }

    @Test func holdsWritesUntilTheHandshakeCompletes() throws {
        let pair = try TLSChannelPair(
            server: .server(TLSFixtures.serverConfiguration()),
            client: .client(TLSFixtures.clientConfiguration())
        )
        let early = Outcome(pair.client.writeAndFlush(ByteBuffer(string: "sent before the handshake")))
        #expect(early.result == nil)
        try pair.interact()

        #expect(pair.serverRecorder.received == ByteBuffer(string: "sent before the handshake"))
        #expect(early.succeeded)
    }

    @Test func coalescesWritesUntilFlush() throws {
        let pair = try handshaken()
        let writes = ["HEADERS", "DATA", "DATA-END"].map { Outcome(pair.client.write(ByteBuffer(string: $0))) }
        #expect(try pair.client.readOutbound(as: ByteBuffer.self) == nil)

        pair.client.flush()
        let sent = try pair.interact()

        #expect(sent.fromClient == 1)
        #expect(pair.serverRecorder.received == ByteBuffer(string: "HEADERSDATADATA-END"))
        #expect(writes.allSatisfy { $0.succeeded })
    }

    @Test func closeSendsCloseNotify() throws {
        let pair = try handshaken()
        let close = Outcome(pair.client.close())
        try pair.interact()

        #expect(close.succeeded)
        #expect(!pair.client.isActive)
        #expect(
            pair.serverRecorder.events == [.handshakeCompleted(negotiatedProtocol: "h2"), .shutdownCompleted]
        )
        #expect(pair.serverRecorder.errors.isEmpty)
        #expect(!pair.server.isActive)
    }

    @Test func dataBeforeCloseNotifyIsDelivered() throws {
        let pair = try handshaken()
        pair.client.writeAndFlush(ByteBuffer(string: "last words"), promise: nil)
        pair.client.close(promise: nil)
        try pair.interact()

        #expect(pair.serverRecorder.received == ByteBuffer(string: "last words"))
        #expect(pair.serverRecorder.events.last == .shutdownCompleted)
    }

    @Test func unflushedWritesFailOnClose() throws {
        let pair = try handshaken()
        let unflushed = Outcome(pair.client.write(ByteBuffer(string: "never flushed")))
        pair.client.close(promise: nil)

        #expect(unflushed.error as? ChannelError == .ioOnClosedChannel)
        let late = Outcome(pair.client.writeAndFlush(ByteBuffer(string: "too late")))
        #expect(late.error != nil)
    }

    @Test func writesPendingOnAFailedHandshakeFail() throws {
        let pair = try TLSChannelPair(
            server: .server(TLSFixtures.serverConfiguration()),
            client: .client(TLSFixtures.clientConfiguration(trustRoots: "other-ca.pem"))
        )
        let early = Outcome(pair.client.writeAndFlush(ByteBuffer(string: "never sent")))
        try pair.interact()

        #expect(early.error is TLSError)
        #expect(pair.serverRecorder.received.readableBytes == 0)
    }
}

@Suite("TLSHandler: hostile input")
struct TLSHandlerHostileInputTests {
    @Test(
        arguments: [
            "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n",
            "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
            String(repeating: "\u{16}\u{03}\u{01}\u{00}\u{05}hello", count: 3),
        ]
    )
    func garbageInsteadOfClientHelloFailsTheHandshake(garbage: String) throws {
        let server = EmbeddedChannel()
        let recorder = EventRecorder()
        try server.pipeline.syncOperations.addHandlers([
            TLSHandler(context: .server(TLSFixtures.serverConfiguration())), recorder,
        ])
        try server.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()

        try server.writeInbound(ByteBuffer(string: garbage))

        #expect(recorder.tlsErrors.count == 1)
        #expect(recorder.tlsErrors.first?.description.hasPrefix("TLS handshake failed: error:") == true)
        #expect(recorder.events.isEmpty)
        #expect(!server.isActive)
        // More bytes after the failure are ignored, not fed to a broken session.
        try server.writeInbound(ByteBuffer(string: garbage))
        #expect(recorder.errors.count == 1)
    }
}
