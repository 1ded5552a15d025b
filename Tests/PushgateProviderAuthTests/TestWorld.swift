import PushgateCrypto
import PushgateModel
import Testing

@testable import PushgateProviderAuth

/// Four provider keys made at test time, a keyring for a production gateway, and token minting.
///
/// | key id | team | topics | environment |
/// |---|---|---|---|
/// | KEY0000001 | TEAM000001 | com.example.app, com.example.second | — |
/// | KEY0000002 | TEAM000001 | com.example.other | — |
/// | KEY0000003 | TEAM000002 | org.example.app | — |
/// | KEY0000004 | TEAM000001 | com.example.app | development |
struct TestWorld: Sendable {
    /// 2023-11-14T22:13:20Z, in milliseconds.
    static let now: Int64 = 1_700_000_000_000
    static let nowSeconds: Int64 = now / 1000
    static let minute: Int64 = 60_000

    let keyA: ES256PrivateKey
    let keyB: ES256PrivateKey
    let keyC: ES256PrivateKey
    let keyD: ES256PrivateKey
    let keyring: ProviderKeyring

    init() throws {
        keyA = try ES256PrivateKey.generate()
        keyB = try ES256PrivateKey.generate()
        keyC = try ES256PrivateKey.generate()
        keyD = try ES256PrivateKey.generate()
        keyring = try ProviderKeyring(
            keys: [
                ProviderKey(
                    teamID: "TEAM000001",
                    keyID: "KEY0000001",
                    publicKey: keyA.publicKey,
                    topics: ["com.example.app", "com.example.second"]
                ),
                ProviderKey(
                    teamID: "TEAM000001",
                    keyID: "KEY0000002",
                    publicKey: keyB.publicKey,
                    topics: ["com.example.other"]
                ),
                ProviderKey(
                    teamID: "TEAM000002",
                    keyID: "KEY0000003",
                    publicKey: keyC.publicKey,
                    topics: ["org.example.app"]
                ),
                ProviderKey(
                    teamID: "TEAM000001",
                    keyID: "KEY0000004",
                    publicKey: keyD.publicKey,
                    topics: ["com.example.app"],
                    environment: .development
                ),
            ],
            environment: .production
        )
    }

    func connection() -> ProviderConnectionAuth {
        ProviderConnectionAuth(keyring: keyring)
    }

    /// `bearer <JWT>` for key A's team and kid unless told otherwise, signed by `signer` (key A).
    func bearer(
        kid: String = "KEY0000001",
        iss: String = "TEAM000001",
        iat: Int64 = TestWorld.nowSeconds,
        signer: ES256PrivateKey? = nil
    ) -> String {
        "bearer "
            + jwt(
                header: #"{"alg":"ES256","kid":"\#(kid)"}"#,
                claims: #"{"iss":"\#(iss)","iat":\#(iat)}"#,
                signer: signer ?? keyA
            )
    }

    /// A compact JWT of these exact JSON texts, correctly signed.
    func jwt(header: String, claims: String, signer: ES256PrivateKey? = nil) -> String {
        let input = Base64URL.encode(header.utf8) + "." + Base64URL.encode(claims.utf8)
        return input + "." + Base64URL.encode((signer ?? keyA).sign(input.utf8))
    }

    /// A compact JWT of these JSON texts with `signature` as its signature bytes.
    static func jwt(header: String, claims: String, signature: [UInt8]) -> String {
        Base64URL.encode(header.utf8) + "." + Base64URL.encode(claims.utf8) + "." + Base64URL.encode(signature)
    }
}

extension Result where Success == AuthorizedProvider, Failure == Refusal {
    var refusal: Refusal? {
        if case .failure(let refusal) = self { return refusal }
        return nil
    }

    var authorized: AuthorizedProvider? {
        if case .success(let provider) = self { return provider }
        return nil
    }
}
