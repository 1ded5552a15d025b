import PushgateModel
import Testing

@testable import PushgateProviderAuth

@Suite("choosing certificate, token or no authentication per request")
struct ProviderAuthenticatorTests {
    let world: TestWorld
    let certificate = CertificateProvider(userID: "com.example.app", subject: "UID=com.example.app,CN=app")

    init() throws {
        world = try TestWorld()
    }

    @Test("with a certificate, certificate rules apply and the authorization header is ignored, as at APNs")
    func certificateWins() {
        let authenticator = ProviderAuthenticator(keyring: world.keyring, acceptsClientCertificates: true)
        var connection = authenticator.makeConnectionState()
        for authorization in [
            nil, "bearer garbage", world.bearer(kid: "KEY0000003", iss: "TEAM000002", signer: world.keyC),
        ] {
            let result = authenticator.authorize(
                certificate: certificate,
                authorization: authorization,
                topic: "com.example.app.voip",
                connection: &connection,
                nowMillis: TestWorld.now
            )
            #expect(result.authorized?.identity == .certificate(subject: "UID=com.example.app,CN=app"))
        }
        #expect(connection.tokenVerifications == 0)
        #expect(!authenticator.requiresToken(certificate: certificate))
    }

    @Test("without a certificate, token rules apply")
    func tokens() {
        let authenticator = ProviderAuthenticator(keyring: world.keyring, acceptsClientCertificates: true)
        var connection = authenticator.makeConnectionState()
        #expect(authenticator.requiresToken(certificate: nil))
        let missing = authenticator.authorize(
            certificate: nil,
            authorization: nil,
            topic: "com.example.app",
            connection: &connection,
            nowMillis: TestWorld.now
        )
        #expect(missing.refusal?.reason == .missingProviderToken)
        // Certificates are accepted too: the detail names both ways in.
        #expect(
            missing.refusal?.detail.hasSuffix("or connect over TLS with a client certificate from the operator's CA")
                == true,
            "\(String(describing: missing.refusal?.detail))"
        )
        var tokensOnly = ProviderAuthenticator(keyring: world.keyring, acceptsClientCertificates: false)
            .makeConnectionState()
        let missingTokenOnly = ProviderAuthenticator(keyring: world.keyring, acceptsClientCertificates: false)
            .authorize(
                certificate: nil,
                authorization: nil,
                topic: "com.example.app",
                connection: &tokensOnly,
                nowMillis: TestWorld.now
            )
        #expect(missingTokenOnly.refusal?.detail.contains("client certificate") == false)
        let good = authenticator.authorize(
            certificate: nil,
            authorization: world.bearer(),
            topic: "com.example.app",
            connection: &connection,
            nowMillis: TestWorld.now
        )
        #expect(good.authorized?.identity == .token(teamID: "TEAM000001", keyID: "KEY0000001"))
        #expect(connection.hasValidToken)
    }

    @Test("a gateway with a client CA and no keys refuses requests without a certificate")
    func certificatesOnly() {
        let authenticator = ProviderAuthenticator(keyring: .empty, acceptsClientCertificates: true)
        var connection = authenticator.makeConnectionState()
        #expect(!authenticator.isUnauthenticated)
        #expect(authenticator.requiresToken(certificate: nil))
        let refused = authenticator.authorize(
            certificate: nil,
            authorization: world.bearer(),
            topic: "com.example.app",
            connection: &connection,
            nowMillis: TestWorld.now
        )
        #expect(refused.refusal?.status == 403)
        #expect(refused.refusal?.reason == .missingProviderToken)
        #expect(refused.refusal?.detail.contains("client certificate only") == true)
    }

    @Test("no keys and no client CA: unauthenticated, but apns-topic is still required")
    func unauthenticated() {
        let authenticator = ProviderAuthenticator(keyring: .empty, acceptsClientCertificates: false)
        var connection = authenticator.makeConnectionState()
        #expect(authenticator.isUnauthenticated)
        #expect(!authenticator.requiresToken(certificate: nil))
        let open = authenticator.authorize(
            certificate: nil,
            authorization: nil,
            topic: "com.example.app",
            connection: &connection,
            nowMillis: TestWorld.now
        )
        #expect(open.authorized == AuthorizedProvider(identity: .unauthenticated, topic: "com.example.app"))
        let noTopic = authenticator.authorize(
            certificate: nil,
            authorization: nil,
            topic: nil,
            connection: &connection,
            nowMillis: TestWorld.now
        )
        #expect(noTopic.refusal?.status == 400)
        #expect(noTopic.refusal?.reason == .missingTopic)
    }
}
