import Foundation
import PushgateCrypto
import PushgateTestTools
import Testing

@testable import PushgateProviderAuth

/// Tokens from code nobody here wrote: PyJWT with pyca/cryptography (Debian's python3-jwt and
/// python3-cryptography), run as `/usr/bin/python3`.
@Suite("PyJWT and Pushgate agree on ES256 provider tokens")
final class PyJWTInteropTests {
    static let python = "/usr/bin/python3"
    let tools: ToolRunner
    let key: ES256PrivateKey

    init() throws {
        tools = try ToolRunner()
        key = try ES256PrivateKey.generate()
        try tools.write("AuthKey.p8", Array(key.pemRepresentation.utf8))
    }

    deinit {
        tools.remove()
    }

    private func python(_ script: String, _ arguments: [String]) throws -> String {
        try tools.write("script.py", Array(script.utf8))
        let (status, output) = try tools.run(Self.python, ["script.py"] + arguments)
        guard status == 0 else {
            throw ToolRunner.Failure(
                description: "python3 exited \(status) (are python3-jwt and python3-cryptography installed?): \(output)"
            )
        }
        return output
    }

    @Test("tokens PyJWT signs with our .p8 verify here, against the public key PyJWT's library wrote")
    func pyjwtSigns() throws {
        let script = """
            import sys, jwt
            from cryptography.hazmat.primitives import serialization
            key_path, team, kid, iat, count, public_path = sys.argv[1:7]
            with open(key_path, "rb") as f:
                key = serialization.load_pem_private_key(f.read(), password=None)
            with open(public_path, "wb") as f:
                f.write(key.public_key().public_bytes(
                    serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
            for _ in range(int(count)):
                print(jwt.encode({"iss": team, "iat": int(iat)}, key, algorithm="ES256", headers={"kid": kid}))
            """
        let output = try python(
            script,
            ["AuthKey.p8", "TEAM000001", "KEY0000001", String(TestWorld.nowSeconds), "32", "python.pub"]
        )
        let tokens = output.split(separator: "\n").map(String.init)
        #expect(tokens.count == 32)

        let configuration = ProviderKeyConfiguration(
            teamID: "TEAM000001",
            keyID: "KEY0000001",
            publicKeyFile: "python.pub",
            topics: ["com.example.app"]
        )
        let keyring = try ProviderKeyring(configurations: [configuration], relativeTo: tools.directory.path)
        #expect(keyring.key(id: "KEY0000001")?.publicKey == key.publicKey)
        for token in tokens {
            // PyJWT's header carries "typ": "JWT" as well; extra fields are fine.
            var connection = ProviderConnectionAuth(keyring: keyring)
            let result = connection.authorize(
                authorization: "bearer " + token,
                topic: "com.example.app",
                nowMillis: TestWorld.now
            )
            #expect(
                result.authorized?.identity == .token(teamID: "TEAM000001", keyID: "KEY0000001"),
                "\(token): \(String(describing: result.refusal))"
            )
        }

        // And a PyJWT token for another team is still refused for its iss.
        let other = try python(
            script,
            ["AuthKey.p8", "TEAM000002", "KEY0000001", String(TestWorld.nowSeconds), "1", "python.pub"]
        )
        var connection = ProviderConnectionAuth(keyring: keyring)
        let refused = connection.authorize(
            authorization: "bearer " + other.trimmingCharacters(in: .whitespacesAndNewlines),
            topic: "com.example.app",
            nowMillis: TestWorld.now
        )
        #expect(refused.refusal?.reason == .invalidProviderToken)
        #expect(refused.refusal?.detail.contains("iss \"TEAM000002\"") == true)
    }

    @Test("tokens ProviderTokenSigner mints verify with PyJWT; a tampered one and another key's do not")
    func pyjwtVerifies() throws {
        try tools.write("public.pem", Array(key.publicKey.pemRepresentation.utf8))
        var signer = ProviderTokenSigner(privateKey: key, keyID: "KEY0000001", teamID: "TEAM000001")
        // One token per 50 minutes: each call past the reuse time signs afresh.
        var tokens = (0..<32).map {
            signer.token(nowMillis: TestWorld.now + Int64($0) * ProviderTokenRules.signerReuse * 1000)
        }
        #expect(Set(tokens).count == 32)
        var tampered = Array(tokens[0].utf8)
        tampered[tampered.count - 50] =
            tampered[tampered.count - 50] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        tokens.append(String(decoding: tampered, as: UTF8.self))
        var stranger = ProviderTokenSigner(
            privateKey: try ES256PrivateKey.generate(),
            keyID: "KEY0000001",
            teamID: "TEAM000001"
        )
        tokens.append(stranger.token(nowMillis: TestWorld.now))
        try tools.write("tokens.txt", Array(tokens.joined(separator: "\n").utf8))

        let script = """
            import sys, json, jwt
            public_path, tokens_path = sys.argv[1:3]
            public = open(public_path).read()
            results = []
            for token in open(tokens_path).read().split():
                try:
                    claims = jwt.decode(token, public, algorithms=["ES256"])
                    results.append({"ok": True, "header": jwt.get_unverified_header(token), "claims": claims})
                except jwt.PyJWTError as error:
                    results.append({"ok": False, "error": type(error).__name__})
            print(json.dumps(results))
            """
        let output = try python(script, ["public.pem", "tokens.txt"])
        let results = try JSONDecoder().decode([PyJWTResult].self, from: Data(output.utf8))
        #expect(results.count == 34)
        for (index, result) in results.prefix(32).enumerated() {
            #expect(result.ok, "token \(index): \(result.error ?? "")")
            #expect(result.header == ["alg": "ES256", "kid": "KEY0000001"])
            #expect(
                result.claims
                    == PyJWTResult.Claims(
                        iss: "TEAM000001",
                        iat: TestWorld.nowSeconds + Int64(index) * ProviderTokenRules.signerReuse
                    )
            )
        }
        #expect(results[32].error == "InvalidSignatureError")
        #expect(results[33].error == "InvalidSignatureError")
    }

    struct PyJWTResult: Decodable {
        struct Claims: Decodable, Equatable {
            var iss: String
            var iat: Int64
        }

        var ok: Bool
        var header: [String: String]?
        var claims: Claims?
        var error: String?
    }
}
