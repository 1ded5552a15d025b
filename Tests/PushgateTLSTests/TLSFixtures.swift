import Foundation
import PushgateTLS
import PushgateTestFixtures

/// The certificates made by `Tests/Fixtures/tls/make-fixtures.sh`, and contexts built from them.
enum TLSFixtures {
    static func path(_ name: String) -> String { TestFixtures.tls(name) }

    static func serverConfiguration(
        clientCA: Bool = false,
        requireClientCertificate: Bool = false,
        alpnProtocols: [String] = ["h2", "http/1.1"]
    ) -> TLSServerConfiguration {
        TLSServerConfiguration(
            certificateChainPath: path("server-chain.pem"),
            privateKeyPath: path("server-key.pem"),
            clientCAPath: clientCA ? path("ca.pem") : nil,
            requireClientCertificate: requireClientCertificate,
            alpnProtocols: alpnProtocols
        )
    }

    /// A client trusting the test CA; `certificate` is a fixture name prefix such as "client".
    static func clientConfiguration(
        certificate: String? = nil,
        trustRoots: String = "ca.pem",
        serverName: String? = "localhost",
        alpnProtocols: [String] = ["h2"],
        verifyPeer: Bool = true
    ) -> TLSClientConfiguration {
        TLSClientConfiguration(
            trustRootsPath: path(trustRoots),
            certificateChainPath: certificate.map { path("\($0).pem") },
            privateKeyPath: certificate.map { path("\($0)-key.pem") },
            serverName: serverName,
            alpnProtocols: alpnProtocols,
            verifyPeer: verifyPeer
        )
    }

    /// The DER bytes of the first certificate in a PEM fixture, decoded independently of OpenSSL.
    static func der(ofPEM name: String) throws -> [UInt8] {
        let pem = try String(contentsOfFile: path(name), encoding: .utf8)
        let base64 = pem.split(separator: "\n")
            .drop { !$0.hasPrefix("-----BEGIN CERTIFICATE-----") }
            .dropFirst()
            .prefix { !$0.hasPrefix("-----END") }
            .joined()
        guard let data = Data(base64Encoded: base64) else {
            throw FixtureError.notPEM(name)
        }
        return Array(data)
    }

    enum FixtureError: Error {
        case notPEM(String)
    }
}
