import Foundation
import PushgateCrypto
import PushgateTestTools
import Testing

@testable import PushgateProviderAuth

@Suite("provider keys from configuration")
final class KeyConfigurationTests {
    let tools: ToolRunner

    deinit {
        tools.remove()
    }

    init() throws {
        tools = try ToolRunner()
        try tools.openssl(
            "genpkey",
            "-algorithm",
            "EC",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-out",
            "AuthKey_KEY0000001.p8"
        )
        try tools.openssl("pkey", "-in", "AuthKey_KEY0000001.p8", "-pubout", "-out", "KEY0000001.pub")
        try tools.openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384", "-out", "p384.p8")
        FileManager.default.createFile(atPath: tools.path("big.p8"), contents: Data(count: 100_000))
    }

    private func configuration(
        publicKeyFile: String? = nil,
        privateKeyFile: String? = nil,
        publicKey: String? = nil,
        topics: [String] = ["com.example.app"],
        environment: String? = nil
    ) -> ProviderKeyConfiguration {
        ProviderKeyConfiguration(
            teamID: "TEAM000001",
            keyID: "KEY0000001",
            publicKeyFile: publicKeyFile,
            privateKeyFile: privateKeyFile,
            publicKey: publicKey,
            topics: topics,
            environment: environment
        )
    }

    @Test("decodes the JSON form and loads a .p8 named relative to the configuration's directory")
    func decodeAndLoad() throws {
        let json = #"""
            [{"teamId": "TEAM000001", "keyId": "KEY0000001", "privateKeyFile": "AuthKey_KEY0000001.p8",
              "topics": ["com.example.app"], "environment": "production"},
             {"teamId": "TEAM000001", "keyId": "KEY0000002", "publicKeyFile": "KEY0000001.pub", "topics": ["com.example.other"]}]
            """#
        let configurations = try JSONDecoder().decode([ProviderKeyConfiguration].self, from: Data(json.utf8))
        #expect(configurations[0] == configuration(privateKeyFile: "AuthKey_KEY0000001.p8", environment: "production"))
        let keyring = try ProviderKeyring(
            configurations: configurations,
            relativeTo: tools.directory.path,
            environment: .production
        )
        #expect(keyring.keys.map(\.keyID) == ["KEY0000001", "KEY0000002"])
        let fromPrivate = try #require(keyring.key(id: "KEY0000001"))
        let fromPublic = try #require(keyring.key(id: "KEY0000002"))
        #expect(fromPrivate.publicKey == fromPublic.publicKey, "the .p8's public half is the key openssl derives")
        #expect(fromPrivate.environment == .production)
        #expect(fromPublic.environment == nil)
        #expect(fromPrivate.allows(topic: "com.example.app.voip"))
        #expect(keyring.key(id: "KEY0000003") == nil)
    }

    @Test("a token signed with the .p8 verifies against the key loaded from the same .p8")
    func signWithP8() throws {
        let signingKey = try ES256PrivateKey(pem: try tools.text("AuthKey_KEY0000001.p8"))
        let key = try configuration(privateKeyFile: tools.path("AuthKey_KEY0000001.p8")).load()
        var connection = ProviderConnectionAuth(keyring: try ProviderKeyring(keys: [key]))
        var signer = ProviderTokenSigner(privateKey: signingKey, keyID: "KEY0000001", teamID: "TEAM000001")
        let result = connection.authorize(
            authorization: "bearer " + signer.token(nowMillis: TestWorld.now),
            topic: "com.example.app",
            nowMillis: TestWorld.now
        )
        #expect(result.authorized != nil)
    }

    @Test("an inline PEM public key")
    func inline() throws {
        let key = try configuration(publicKey: try tools.text("KEY0000001.pub")).load()
        #expect(key.publicKey == (try ES256PublicKey(pem: try tools.text("KEY0000001.pub"))))
    }

    @Test("every mistake names the key and the field, and says what to do")
    func mistakes() throws {
        let cases: [(ProviderKeyConfiguration, field: String, problem: String)] = [
            (configuration(), "publicKeyFile/privateKeyFile/publicKey", "no key; give exactly one of"),
            (
                configuration(publicKeyFile: "KEY0000001.pub", privateKeyFile: "AuthKey_KEY0000001.p8"),
                "publicKeyFile/privateKeyFile/publicKey", "publicKeyFile and privateKeyFile given"
            ),
            (
                configuration(privateKeyFile: "missing.p8"), "privateKeyFile",
                "\(tools.path("missing.p8")) cannot be read: No such file or directory"
            ),
            (
                configuration(publicKeyFile: "missing.pub"), "publicKeyFile",
                "\(tools.path("missing.pub")) cannot be read: No such file or directory"
            ),
            // Not a key file: refused beyond 64 KiB (a file past 2 GiB was read whole, then trapped
            // converting its length to Int32), and when not a regular file.
            (configuration(privateKeyFile: "big.p8"), "privateKeyFile", "big.p8 holds more than 65536 bytes"),
            (configuration(privateKeyFile: "/dev/zero"), "privateKeyFile", "/dev/zero is not a regular file"),
            (
                configuration(privateKeyFile: "p384.p8"), "privateKeyFile",
                "\(tools.path("p384.p8")): the EC key is on curve secp384r1"
            ),
            (
                configuration(privateKeyFile: "KEY0000001.pub"), "privateKeyFile",
                "(this is a public key: name it in publicKeyFile)"
            ),
            (
                configuration(publicKeyFile: "AuthKey_KEY0000001.p8"), "publicKeyFile",
                "(this is a private key: name it in privateKeyFile)"
            ),
            (
                configuration(publicKey: "-----BEGIN PUBLIC KEY-----\nnope\n-----END PUBLIC KEY-----\n"), "publicKey",
                "not a PEM key"
            ),
            (
                configuration(publicKeyFile: "KEY0000001.pub", environment: "staging"), "environment",
                "\"staging\" is neither"
            ),
            (configuration(publicKeyFile: "KEY0000001.pub", topics: []), "topics", "no topics"),
            (
                configuration(publicKeyFile: "KEY0000001.pub", topics: ["com.example.app", "com example"]), "topics",
                "may contain only"
            ),
        ]
        for (configuration, field, problem) in cases {
            #expect {
                _ = try configuration.load(relativeTo: tools.directory.path)
            } throws: { error in
                guard let error = error as? ProviderKeyConfigurationError else { return false }
                return error.keyID == "KEY0000001" && error.field == field && error.problem.contains(problem)
                    && error.description.hasPrefix("provider key \"KEY0000001\": \(field): ")
            }
        }
    }

    @Test("ids with characters no token could carry are refused, and so is a key id configured twice")
    func ids() throws {
        let publicKey = try ES256PublicKey(pem: try tools.text("KEY0000001.pub"))
        #expect(throws: ProviderKeyConfigurationError.self) {
            try ProviderKey(teamID: "TEAM000001", keyID: "KEY 1", publicKey: publicKey, topics: ["com.example.app"])
        }
        #expect(throws: ProviderKeyConfigurationError.self) {
            try ProviderKey(teamID: "", keyID: "KEY0000001", publicKey: publicKey, topics: ["com.example.app"])
        }
        let key = try ProviderKey(
            teamID: "TEAM000001",
            keyID: "KEY0000001",
            publicKey: publicKey,
            topics: ["com.example.app"]
        )
        #expect(
            throws: ProviderKeyConfigurationError(
                keyID: "KEY0000001",
                field: "keyId",
                problem: "configured twice; every provider key needs its own key id"
            )
        ) {
            try ProviderKeyring(keys: [key, key])
        }
    }

    @Test("keys of different teams may not share a topic, nor its suffixed forms; keys of one team may (rotation)")
    func overlappingTopics() throws {
        let publicKey = try ES256PublicKey(pem: try tools.text("KEY0000001.pub"))
        let acme = try ProviderKey(
            teamID: "TEAM000001",
            keyID: "KEY0000001",
            publicKey: publicKey,
            topics: ["com.acme"]
        )
        let voip = try ProviderKey(
            teamID: "TEAM000002",
            keyID: "KEY0000002",
            publicKey: publicKey,
            topics: ["com.acme.voip"]
        )
        #expect(
            throws: ProviderKeyConfigurationError(
                keyID: "KEY0000002",
                field: "topics",
                problem:
                    "may push to \"com.acme.voip\", as key \"KEY0000001\" of team TEAM000001 may: keys of different teams must not share a topic (nor its .voip, .complication, ... forms)"
            )
        ) {
            try ProviderKeyring(keys: [voip, acme])
        }
        let rotated = try ProviderKey(
            teamID: "TEAM000001",
            keyID: "KEY0000003",
            publicKey: publicKey,
            topics: ["com.acme", "com.acme.news"]
        )
        #expect(try ProviderKeyring(keys: [acme, rotated]).keys.count == 2)
        let other = try ProviderKey(
            teamID: "TEAM000002",
            keyID: "KEY0000004",
            publicKey: publicKey,
            topics: ["com.acme.news2"]
        )
        #expect(try ProviderKeyring(keys: [acme, other]).keys.count == 2, "a longer bundle id is another app")
    }
}
