import PushgateTLS
import Testing

@Suite("TLSContext: configuration errors name what to fix")
struct TLSContextTests {
    @Test func loadsTheFixtures() throws {
        _ = try TLSContext.server(TLSFixtures.serverConfiguration(clientCA: true, requireClientCertificate: true))
        _ = try TLSContext.client(TLSFixtures.clientConfiguration(certificate: "client"))
        _ = try TLSContext.client(TLSClientConfiguration())
    }

    @Test func missingCertificateChain() {
        var configuration = TLSFixtures.serverConfiguration()
        configuration.certificateChainPath = "/nonexistent/chain.pem"

        let error = #expect(throws: TLSError.self) { try TLSContext.server(configuration) }
        #expect(error?.message == "cannot load TLS certificate chain from /nonexistent/chain.pem")
        #expect(error?.description.contains("No such file or directory") == true)
    }

    @Test func missingPrivateKey() {
        var configuration = TLSFixtures.serverConfiguration()
        configuration.privateKeyPath = "/nonexistent/key.pem"

        let error = #expect(throws: TLSError.self) { try TLSContext.server(configuration) }
        #expect(error?.description.hasPrefix("cannot load TLS private key from /nonexistent/key.pem: error:") == true)
    }

    @Test func certificateInPlaceOfKey() {
        var configuration = TLSFixtures.serverConfiguration()
        configuration.privateKeyPath = TLSFixtures.path("server.pem")

        let error = #expect(throws: TLSError.self) { try TLSContext.server(configuration) }
        #expect(error?.message == "cannot load TLS private key from \(TLSFixtures.path("server.pem"))")
        #expect(error?.openSSLErrors.isEmpty == false)
    }

    @Test func keyOfAnotherCertificate() {
        var configuration = TLSFixtures.serverConfiguration()
        configuration.privateKeyPath = TLSFixtures.path("client-key.pem")

        let error = #expect(throws: TLSError.self) { try TLSContext.server(configuration) }
        #expect(error?.description.contains(TLSFixtures.path("client-key.pem")) == true)
        #expect(error?.description.contains("key values mismatch") == true)
    }

    @Test func missingClientCA() {
        var configuration = TLSFixtures.serverConfiguration()
        configuration.clientCAPath = "/nonexistent/clients.pem"

        let error = #expect(throws: TLSError.self) { try TLSContext.server(configuration) }
        #expect(error?.message == "cannot load client CA certificates from /nonexistent/clients.pem")
    }

    @Test func requiredClientCertificateWithoutClientCA() {
        var configuration = TLSFixtures.serverConfiguration()
        configuration.requireClientCertificate = true

        let error = #expect(throws: TLSError.self) { try TLSContext.server(configuration) }
        #expect(error?.description.contains("clientCAPath") == true)
    }

    @Test(arguments: ["", String(repeating: "x", count: 256)])
    func invalidALPNName(name: String) {
        let error = #expect(throws: TLSError.self) {
            try TLSContext.server(TLSFixtures.serverConfiguration(alpnProtocols: ["h2", name]))
        }
        #expect(error?.description.contains("must be 1 to 255 bytes long") == true)
        #expect(throws: TLSError.self) {
            try TLSContext.client(TLSFixtures.clientConfiguration(alpnProtocols: [name]))
        }
    }

    @Test func missingTrustRoots() {
        var configuration = TLSFixtures.clientConfiguration()
        configuration.trustRootsPath = "/nonexistent/roots.pem"

        let error = #expect(throws: TLSError.self) { try TLSContext.client(configuration) }
        #expect(error?.message == "cannot load TLS trust roots from /nonexistent/roots.pem")
    }

    @Test func clientCertificateWithoutKey() {
        var configuration = TLSFixtures.clientConfiguration(certificate: "client")
        configuration.privateKeyPath = nil

        let error = #expect(throws: TLSError.self) { try TLSContext.client(configuration) }
        #expect(error?.description.contains(TLSFixtures.path("client.pem")) == true)
        #expect(error?.description.contains("privateKeyPath") == true)
    }

    @Test func missingClientCertificate() {
        var configuration = TLSFixtures.clientConfiguration(certificate: "client")
        configuration.certificateChainPath = "/nonexistent/client.pem"

        let error = #expect(throws: TLSError.self) { try TLSContext.client(configuration) }
        #expect(error?.message == "cannot load TLS certificate chain from /nonexistent/client.pem")
    }
}
