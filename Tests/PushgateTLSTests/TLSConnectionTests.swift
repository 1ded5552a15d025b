import NIOCore
import Testing

@testable import PushgateTLS

@Suite("TLSConnection: the sans-I/O core")
struct TLSConnectionTests {
    private let allocator = ByteBufferAllocator()

    /// Hands everything `source` has for its peer to `destination`; true if there was anything.
    private func pump(_ source: TLSConnection, to destination: TLSConnection) throws -> Bool {
        guard let ciphertext = source.drainCiphertext(allocator: allocator) else {
            return false
        }
        try destination.receive(ciphertext)
        return true
    }

    private func handshake() throws -> (client: TLSConnection, server: TLSConnection) {
        let client = try TLSConnection(
            context: .client(TLSFixtures.clientConfiguration()),
            serverName: "localhost"
        )
        let server = try TLSConnection(context: .server(TLSFixtures.serverConfiguration()), serverName: nil)
        var clientDone = false
        var serverDone = false
        for _ in 0..<10 where !(clientDone && serverDone) {
            if !clientDone, case .complete = client.doHandshake() { clientDone = true }
            _ = try pump(client, to: server)
            if !serverDone, case .complete = server.doHandshake() { serverDone = true }
            _ = try pump(server, to: client)
        }
        try #require(clientDone && serverDone)
        return (client, server)
    }

    @Test func handshakeNegotiatesH2() throws {
        let (client, server) = try handshake()

        #expect(client.negotiatedProtocol == "h2")
        #expect(server.negotiatedProtocol == "h2")
        #expect(client.verifiedPeerCertificate?.commonName == "localhost")
    }

    @Test func partialRecordsWaitForTheRest() throws {
        let (client, server) = try handshake()
        // The server's session tickets arrive on the client's first read.
        var plaintext = allocator.buffer(capacity: 0)
        #expect(isNeedsMoreInput(client.readPlaintext(into: &plaintext)))

        try client.writePlaintext(ByteBuffer(string: "split across reads"))
        var ciphertext = try #require(client.drainCiphertext(allocator: allocator))
        let head = ciphertext.readSlice(length: 7)!
        try server.receive(head)
        #expect(isNeedsMoreInput(server.readPlaintext(into: &plaintext)))
        #expect(plaintext.readableBytes == 0)

        try server.receive(ciphertext)
        #expect(isNeedsMoreInput(server.readPlaintext(into: &plaintext)))
        #expect(plaintext == ByteBuffer(string: "split across reads"))
    }

    @Test func closeNotifyIsReportedAsPeerClosed() throws {
        let (client, server) = try handshake()
        client.shutdown()
        _ = try pump(client, to: server)

        var plaintext = allocator.buffer(capacity: 0)
        guard case .peerClosed = server.readPlaintext(into: &plaintext) else {
            Issue.record("expected peerClosed")
            return
        }
    }

    /// Memory BIOs keep their largest size forever; a connection that once moved 1 MiB must not hold
    /// on to it while idle.
    @Test func givesBackBufferMemoryAfterALargeTransfer() throws {
        let (client, server) = try handshake()
        let payload = ByteBuffer(repeating: 0x5A, count: 1 << 20)

        try client.writePlaintext(payload)
        let ciphertext = try #require(client.drainCiphertext(allocator: allocator))
        #expect(ciphertext.readableBytes > 1 << 20)
        // Stop short of a record boundary so a partial record must survive the BIO swap.
        try server.receive(ciphertext.getSlice(at: 0, length: ciphertext.readableBytes - 100)!)
        var plaintext = allocator.buffer(capacity: 0)
        #expect(isNeedsMoreInput(server.readPlaintext(into: &plaintext)))
        #expect(server.bufferCapacity > 1 << 20)

        _ = server.drainCiphertext(allocator: allocator)
        // What is left is the partial record, in a buffer about its size.
        #expect(server.bufferCapacity < 32 * 1024)
        #expect(client.bufferCapacity <= 2 * TLSConnection.retainedBufferLimit)

        try server.receive(ciphertext.getSlice(at: ciphertext.readableBytes - 100, length: 100)!)
        #expect(isNeedsMoreInput(server.readPlaintext(into: &plaintext)))
        #expect(plaintext == payload)
    }

    private func isNeedsMoreInput(_ outcome: TLSConnection.ReadOutcome) -> Bool {
        if case .needsMoreInput = outcome { return true }
        return false
    }
}
