import PushgateCrypto
import PushgateModel
import Testing

@testable import PushgateProviderAuth

/// One `authorization` value a fresh connection must refuse, and how.
struct BadToken: Sendable, CustomTestStringConvertible {
    let name: String
    let status: Int
    let reason: String
    /// Part of the detail a person reads.
    let detail: String
    let authorization: @Sendable (TestWorld) -> String?

    init(
        _ name: String,
        _ status: Int,
        _ reason: String,
        _ detail: String,
        _ authorization: @escaping @Sendable (TestWorld) -> String?
    ) {
        self.name = name
        self.status = status
        self.reason = reason
        self.detail = detail
        self.authorization = authorization
    }

    var testDescription: String { name }
}

private let es256 = #"{"alg":"ES256","kid":"KEY0000001"}"#
private let claims = #"{"iss":"TEAM000001","iat":\#(TestWorld.nowSeconds)}"#
private let anySignature = [UInt8](repeating: 0x42, count: 64)

private func missing(
    _ name: String,
    _ detail: String,
    _ authorization: @escaping @Sendable (TestWorld) -> String?
) -> BadToken {
    BadToken(name, 403, "MissingProviderToken", detail, authorization)
}

private func invalid(
    _ name: String,
    _ detail: String,
    _ authorization: @escaping @Sendable (TestWorld) -> String?
) -> BadToken {
    BadToken(name, 403, "InvalidProviderToken", detail, authorization)
}

/// `bearer` + a token whose header and claims are these texts, signed by key A.
private func signed(_ header: String, _ claims: String) -> @Sendable (TestWorld) -> String? {
    { world in "bearer " + world.jwt(header: header, claims: claims) }
}

private func replacingSignature(_ world: TestWorld, with signature: String) -> String {
    let token = world.bearer()
    return String(token[..<token.lastIndex(of: ".")!]) + "." + signature
}

@Suite("provider tokens a connection refuses, one reason each")
struct TokenRefusalTests {
    /// An unknown kid and a bad signature answer alike, naming only the token's own kid.
    static func doesNotVerify(_ kid: String) -> String {
        "the token does not verify: no provider key with kid \"\(kid)\" is configured on this gateway, or the signature was not made with that key's .p8"
    }

    static let cases: [BadToken] = [
        missing("no authorization header", "no authorization header") { _ in nil },
        missing("an empty authorization header", "an empty value") { _ in "" },
        missing("the Basic scheme", "scheme \"Basic\"") { _ in "Basic dXNlcjpwYXNz" },
        missing("a bare JWT without the bearer scheme", "scheme \"eyJ") { world in String(world.bearer().dropFirst(7))
        },
        missing("bearer and no token", "carries no token") { _ in "bearer" },
        missing("bearer and only spaces", "carries no token") { _ in "bearer   " },

        invalid("a wrong signature", Self.doesNotVerify("KEY0000001")) { world in
            var token = Array(world.bearer().utf8)
            // Flip a bit well inside r, so the base64url stays canonical.
            token[token.count - 60] =
                token[token.count - 60] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
            return String(decoding: token, as: UTF8.self)
        },
        invalid("a signature made with another key", "does not verify") { world in world.bearer(signer: world.keyB) },
        invalid("a signature over other claims", "does not verify") { world in
            let good = world.bearer()
            let other = world.bearer(iat: TestWorld.nowSeconds - 1)
            return String(other[..<other.lastIndex(of: ".")!] + good[good.lastIndex(of: ".")!...])
        },
        invalid("a truncated signature (63 bytes)", "the signature is 63 bytes") { world in
            replacingSignature(world, with: Base64URL.encode(world.keyA.sign(Array("x".utf8)).prefix(63)))
        },
        invalid("an empty signature", "the signature is 0 bytes") { world in replacingSignature(world, with: "") },
        invalid("a DER signature", "not DER") { world in
            replacingSignature(world, with: Base64URL.encode(ECDSADER.sample))
        },
        invalid("a padded signature", "signature is not unpadded base64url") { world in world.bearer() + "==" },
        invalid("standard base64 in the header", "header is not unpadded base64url") { _ in
            "bearer eyJ+.e30." + Base64URL.encode(anySignature)
        },
        invalid("a space inside the claims set", "claims set is not unpadded base64url") { _ in
            "bearer e30.e3 0." + Base64URL.encode(anySignature)
        },
        invalid("two parts", "has 2 parts") { _ in "bearer e30.e30" },
        invalid("four parts", "has 4 parts") { _ in "bearer e30.e30.e30.e30" },
        invalid("a header that is not JSON", "header is not JSON") { _ in
            "bearer " + TestWorld.jwt(header: "alg=ES256", claims: claims, signature: anySignature)
        },
        invalid("a header that is a JSON array", "header is not a JSON object") { _ in
            "bearer " + TestWorld.jwt(header: #"["ES256"]"#, claims: claims, signature: anySignature)
        },
        invalid("a claims set that is JSON null", "claims set is not a JSON object") { _ in
            "bearer " + TestWorld.jwt(header: es256, claims: "null", signature: anySignature)
        },
        invalid("alg HS256", "alg \"HS256\"; APNs accepts only ES256") { _ in
            "bearer "
                + TestWorld.jwt(header: #"{"alg":"HS256","kid":"KEY0000001"}"#, claims: claims, signature: anySignature)
        },
        invalid("alg none with no signature", "alg \"none\"") { _ in
            "bearer " + TestWorld.jwt(header: #"{"alg":"none","kid":"KEY0000001"}"#, claims: claims, signature: [])
        },
        invalid("no alg", "has no alg") { _ in
            "bearer " + TestWorld.jwt(header: #"{"kid":"KEY0000001"}"#, claims: claims, signature: anySignature)
        },
        invalid("alg a number", "alg in the JWT header must be a string") { _ in
            "bearer "
                + TestWorld.jwt(header: #"{"alg":256,"kid":"KEY0000001"}"#, claims: claims, signature: anySignature)
        },
        invalid("a crit header", "crit") { _ in
            "bearer "
                + TestWorld.jwt(
                    header: #"{"alg":"ES256","kid":"KEY0000001","crit":["exp"]}"#,
                    claims: claims,
                    signature: anySignature
                )
        },
        invalid("no kid", "has no kid") { _ in
            "bearer " + TestWorld.jwt(header: #"{"alg":"ES256"}"#, claims: claims, signature: anySignature)
        },
        invalid("an empty kid", "has no kid") { _ in
            "bearer " + TestWorld.jwt(header: #"{"alg":"ES256","kid":""}"#, claims: claims, signature: anySignature)
        },
        invalid("kid a number", "kid in the JWT header must be a string") { _ in
            "bearer " + TestWorld.jwt(header: #"{"alg":"ES256","kid":1}"#, claims: claims, signature: anySignature)
        },
        invalid("kid twice in the header", "the JWT header has \"kid\" twice") { world in
            "bearer " + world.jwt(header: #"{"alg":"ES256","kid":"KEY0000001","kid":"KEY9999999"}"#, claims: claims)
        },
        invalid("kid twice, once escaped", "the JWT header has \"kid\" twice") { world in
            "bearer "
                + world.jwt(header: #"{"alg":"ES256","k\u0069d":"KEY9999999", "kid" : "KEY0000001"}"#, claims: claims)
        },
        // Found by fuzzing (Tests/Fuzz, provider-token): the duplicate check's parser trapped on
        // a high surrogate escape followed by another escape, before any signature check.
        invalid("a high surrogate escape before one that is not a low surrogate", "the JWT header is not JSON") { _ in
            "bearer "
                + TestWorld.jwt(
                    header: #"{"alg":"ES256","kid":"\ud83d\uade0"}"#,
                    claims: claims,
                    signature: anySignature
                )
        },
        // Found by fuzzing (Tests/Fuzz, provider-token): Foundation's decoder does not check the
        // members it does not decode, so signed tokens whose header or claims are not JSON were
        // authorized.
        invalid("a bad escape in a header member no one reads", "the JWT header is not JSON") { world in
            "bearer " + world.jwt(header: #"{"alg":"ES256","kid":"KEY0000001","x":"\q"}"#, claims: claims)
        },
        invalid("a leading zero in a claim no one reads", "the JWT claims set is not JSON") { world in
            "bearer " + world.jwt(header: es256, claims: #"{"iss":"TEAM000001","iat":\#(TestWorld.nowSeconds),"x":01}"#)
        },
        invalid("iss twice in the claims set", "the JWT claims set has \"iss\" twice") { world in
            "bearer "
                + world.jwt(
                    header: es256,
                    claims: #"{"iss":"TEAM000001","iat":\#(TestWorld.nowSeconds),"iss":"TEAM000002"}"#
                )
        },
        invalid("an unknown kid", Self.doesNotVerify("KEY9999999")) { world in world.bearer(kid: "KEY9999999") },
        invalid(
            "iss another team",
            "iss \"TEAM000002\" is not the team of key \"KEY0000001\"; set iss to \"TEAM000001\""
        ) { world in
            world.bearer(iss: "TEAM000002")
        },
        invalid("no iss", "has no iss") { _ in
            "bearer " + TestWorld.jwt(header: es256, claims: #"{"iat":1700000000}"#, signature: anySignature)
        },
        invalid("no iat", "has no iat") { _ in
            "bearer " + TestWorld.jwt(header: es256, claims: #"{"iss":"TEAM000001"}"#, signature: anySignature)
        },
        invalid("iat a string", "whole number of seconds") { _ in
            "bearer "
                + TestWorld.jwt(
                    header: es256,
                    claims: #"{"iss":"TEAM000001","iat":"1700000000"}"#,
                    signature: anySignature
                )
        },
        invalid("iat a fraction", "whole number of seconds") { _ in
            "bearer "
                + TestWorld.jwt(
                    header: es256,
                    claims: #"{"iss":"TEAM000001","iat":1700000000.5}"#,
                    signature: anySignature
                )
        },
        invalid("iat in milliseconds", "milliseconds") { world in world.bearer(iat: TestWorld.now) },
        invalid("iat negative", "negative") { world in world.bearer(iat: -1) },
        BadToken("iat 3601 s old", 403, "ExpiredProviderToken", "issued 3601 s ago") { world in
            world.bearer(iat: TestWorld.nowSeconds - 3601)
        },
        BadToken("iat a day old", 403, "ExpiredProviderToken", "sign a new one") { world in
            world.bearer(iat: TestWorld.nowSeconds - 86_400)
        },
        invalid("iat 61 s in the future", "61 s ahead of the gateway's clock") { world in
            world.bearer(iat: TestWorld.nowSeconds + 61)
        },
        BadToken(
            "a key of the other environment",
            403,
            "BadEnvironmentKeyIdInToken",
            "key \"KEY0000004\" is for development, but this gateway is production"
        ) {
            world in world.bearer(kid: "KEY0000004", signer: world.keyD)
        },
    ]

    @Test("refused with the APNs status and reason, and a detail that says what to fix", arguments: cases)
    func refused(_ bad: BadToken) throws {
        let world = try TestWorld()
        var connection = world.connection()
        let result = connection.authorize(
            authorization: bad.authorization(world),
            topic: "com.example.app",
            nowMillis: TestWorld.now
        )
        let refusal = try #require(result.refusal, "accepted")
        #expect(refusal.status == bad.status)
        #expect(refusal.reason.name == bad.reason)
        #expect(refusal.detail.contains(bad.detail), "\(refusal.detail)")
        #expect(refusal.timestamp == nil)
        #expect(!connection.hasValidToken)
        #expect(connection.boundKey == nil)

        // A refused token neither binds the connection nor counts as a token switch.
        let good = connection.authorize(
            authorization: world.bearer(),
            topic: "com.example.app",
            nowMillis: TestWorld.now
        )
        #expect(good.authorized?.identity == .token(teamID: "TEAM000001", keyID: "KEY0000001"))
        #expect(connection.hasValidToken)
    }

    @Test(
        "accepted at the edges: iat exactly 3600 s old or 60 s ahead, Bearer in capitals, extra fields",
        arguments: [
            "exactly 3600 s old", "60 s ahead", "Bearer", "BEARER and two spaces", "extra header and claims fields",
            "key B of the same team",
        ]
    )
    func acceptedEdges(_ name: String) throws {
        let world = try TestWorld()
        let authorization: String
        var topic = "com.example.app"
        switch name {
        case "exactly 3600 s old": authorization = world.bearer(iat: TestWorld.nowSeconds - 3600)
        case "60 s ahead": authorization = world.bearer(iat: TestWorld.nowSeconds + 60)
        case "Bearer": authorization = "Bearer " + world.bearer().dropFirst(7)
        case "BEARER and two spaces": authorization = "BEARER  " + world.bearer().dropFirst(7)
        case "extra header and claims fields":
            authorization =
                "bearer "
                + world.jwt(
                    header: #"{"typ":"JWT","alg":"ES256","kid":"KEY0000001","x5u":null}"#,
                    claims:
                        #"{"iss":"TEAM000001","iat":\#(TestWorld.nowSeconds),"exp":1,"aud":["apns"],"nested":{"a":[1,2]}}"#
                )
        default:
            authorization = world.bearer(kid: "KEY0000002", signer: world.keyB)
            topic = "com.example.other"
        }
        var connection = world.connection()
        let result = connection.authorize(authorization: authorization, topic: topic, nowMillis: TestWorld.now)
        #expect(result.authorized?.topic == topic, "\(String(describing: result.refusal))")
        #expect(connection.hasValidToken)
    }
}

/// A DER ECDSA-Sig-Value (70 bytes) where JWS wants raw r || s.
enum ECDSADER {
    static let sample: [UInt8] =
        [0x30, 0x44, 0x02, 0x20] + [UInt8](repeating: 0x11, count: 32) + [0x02, 0x20]
        + [UInt8](repeating: 0x22, count: 32)
}
