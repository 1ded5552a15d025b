import PushgateCrypto
import Testing

@testable import PushgateProviderAuth

@Suite("ProviderTokenSigner")
struct ProviderTokenSignerTests {
    let world: TestWorld

    init() throws {
        world = try TestWorld()
    }

    @Test("one token for 50 minutes, then a new one with iat in whole seconds")
    func reuse() {
        var signer = ProviderTokenSigner(privateKey: world.keyA, keyID: "KEY0000001", teamID: "TEAM000001")
        let first = signer.token(nowMillis: TestWorld.now + 999)
        #expect(signer.token(nowMillis: TestWorld.now + 3_000_000 - 1) == first)
        let second = signer.token(nowMillis: TestWorld.now + 3_000_000)
        #expect(second != first)
        #expect(signer.token(nowMillis: TestWorld.now + 3_000_001) == second)

        var connection = world.connection()
        let result = connection.authorize(
            authorization: "bearer " + first,
            topic: "com.example.app",
            nowMillis: TestWorld.now
        )
        #expect(result.authorized != nil)
        let claims = Base64URL.decode(first.split(separator: ".")[1]).map { String(decoding: $0, as: UTF8.self) }
        #expect(claims == #"{"iss":"TEAM000001","iat":\#(TestWorld.nowSeconds)}"#)
    }

    @Test("a token kept from an earlier run is reused only if this key id and team minted it, within its 50 minutes")
    func reusingPrevious() {
        var earlier = ProviderTokenSigner(privateKey: world.keyA, keyID: "KEY0000001", teamID: "TEAM000001")
        let token = earlier.token(nowMillis: TestWorld.now)
        let kept = (token: token, issuedAt: TestWorld.nowSeconds)

        var same = ProviderTokenSigner(privateKey: world.keyA, keyID: "KEY0000001", teamID: "TEAM000001", reusing: kept)
        #expect(same.token(nowMillis: TestWorld.now + 60_000) == token)
        var late = ProviderTokenSigner(privateKey: world.keyA, keyID: "KEY0000001", teamID: "TEAM000001", reusing: kept)
        #expect(late.token(nowMillis: TestWorld.now + 3_000_000) != token)
        for (keyID, teamID) in [("KEY0000002", "TEAM000001"), ("KEY0000001", "TEAM000002")] {
            var other = ProviderTokenSigner(privateKey: world.keyA, keyID: keyID, teamID: teamID, reusing: kept)
            #expect(other.token(nowMillis: TestWorld.now + 60_000) != token, "\(keyID) \(teamID)")
        }
        // The iat kept with it must be the token's own.
        var shifted = ProviderTokenSigner(
            privateKey: world.keyA,
            keyID: "KEY0000001",
            teamID: "TEAM000001",
            reusing: (token, kept.issuedAt + 1)
        )
        #expect(shifted.token(nowMillis: TestWorld.now + 60_000) != token)
    }

    @Test("a clock that steps back before the cached iat gets a new token")
    func clockBack() {
        var signer = ProviderTokenSigner(privateKey: world.keyA, keyID: "KEY0000001", teamID: "TEAM000001")
        let first = signer.token(nowMillis: TestWorld.now)
        #expect(signer.token(nowMillis: TestWorld.now - 1000) != first)
    }

    @Test("a provider using the signer for five hours on one connection is never refused")
    func neverRefused() {
        var signer = ProviderTokenSigner(privateKey: world.keyA, keyID: "KEY0000001", teamID: "TEAM000001")
        var connection = world.connection()
        var distinct: Set<String> = []
        for step in 0..<(5 * 60 * 2) {
            let now = TestWorld.now + Int64(step) * 30_000
            let token = signer.token(nowMillis: now)
            distinct.insert(token)
            let result = connection.authorize(
                authorization: "bearer " + token,
                topic: "com.example.app",
                nowMillis: now
            )
            #expect(result.authorized != nil, "at \(step * 30) s: \(String(describing: result.refusal))")
        }
        #expect(distinct.count == 6)
        #expect(connection.tokenVerifications == 6)
    }

    @Test("ids are escaped as JSON strings")
    func escaping() throws {
        var signer = ProviderTokenSigner(privateKey: world.keyA, keyID: "K\"1\\\u{01}", teamID: "T")
        let header = try #require(Base64URL.decode(signer.token(nowMillis: TestWorld.now).split(separator: ".")[0]))
        #expect(String(decoding: header, as: UTF8.self) == #"{"alg":"ES256","kid":"K\"1\\\u0001"}"#)
    }
}
