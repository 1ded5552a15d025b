import PushgateCrypto
import PushgateModel
import Testing

@testable import PushgateProviderAuth

@Suite("one connection's token state: cache, expiry, switching, binding, topics")
struct ConnectionAuthTests {
    typealias World = TestWorld
    let world: TestWorld

    init() throws {
        world = try TestWorld()
    }

    @Test("a repeated token is answered from the cache: verified once")
    func cacheHit() {
        var connection = world.connection()
        let token = world.bearer()
        #expect(!connection.hasValidToken)
        for request in 0..<1000 {
            let result = connection.authorize(
                authorization: token,
                topic: "com.example.app",
                nowMillis: World.now + Int64(request)
            )
            #expect(
                result.authorized
                    == AuthorizedProvider(
                        identity: .token(teamID: "TEAM000001", keyID: "KEY0000001"),
                        topic: "com.example.app"
                    )
            )
        }
        #expect(connection.tokenVerifications == 1)
        #expect(connection.hasValidToken)
        #expect(connection.boundKey?.keyID == "KEY0000001")
    }

    @Test("a repeated bad token is refused from the cache: verified once")
    func refusedCacheHit() {
        var connection = world.connection()
        let bad = world.bearer(signer: world.keyB)
        for _ in 0..<100 {
            #expect(
                connection.authorize(authorization: bad, topic: "com.example.app", nowMillis: World.now).refusal?.reason
                    == .invalidProviderToken
            )
        }
        #expect(connection.tokenVerifications == 1)
    }

    @Test("a cached verdict expires one hour after iat, without verifying again")
    func cachedExpiry() {
        var connection = world.connection()
        let token = world.bearer(iat: World.nowSeconds)
        #expect(
            connection.authorize(authorization: token, topic: "com.example.app", nowMillis: World.now).authorized != nil
        )
        #expect(
            connection.authorize(authorization: token, topic: "com.example.app", nowMillis: World.now + 3_600_000)
                .authorized != nil
        )
        let expired = connection.authorize(
            authorization: token,
            topic: "com.example.app",
            nowMillis: World.now + 3_600_001
        )
        #expect(expired.refusal?.status == 403)
        #expect(expired.refusal?.reason == .expiredProviderToken)
        #expect(connection.tokenVerifications == 1)
        #expect(connection.hasValidToken, "the one-stream limit is lifted once and for all")
    }

    @Test("a token from a clock slightly ahead becomes usable once the gateway's clock catches up")
    func futureTokenLater() {
        var connection = world.connection()
        let token = world.bearer(iat: World.nowSeconds + 120)
        #expect(
            connection.authorize(authorization: token, topic: "com.example.app", nowMillis: World.now).refusal?.reason
                == .invalidProviderToken
        )
        #expect(
            connection.authorize(authorization: token, topic: "com.example.app", nowMillis: World.now + World.minute)
                .authorized != nil
        )
        #expect(connection.tokenVerifications == 1)
    }

    @Test("switching tokens: the first switch is free, the next within 20 minutes is 429, after 20 minutes it is fine")
    func tokenUpdates() {
        var connection = world.connection()
        let first = world.bearer(iat: World.nowSeconds)
        let second = world.bearer(iat: World.nowSeconds + 1)
        let third = world.bearer(iat: World.nowSeconds + 2)
        let fourth = world.bearer(iat: World.nowSeconds + 3)
        #expect(
            connection.authorize(authorization: first, topic: "com.example.app", nowMillis: World.now).authorized != nil
        )
        #expect(
            connection.authorize(authorization: second, topic: "com.example.app", nowMillis: World.now + World.minute)
                .authorized != nil
        )

        let tooSoon = connection.authorize(
            authorization: third,
            topic: "com.example.app",
            nowMillis: World.now + 20 * World.minute
        )
        #expect(tooSoon.refusal?.status == 429)
        #expect(tooSoon.refusal?.reason == .tooManyProviderTokenUpdates)
        #expect(tooSoon.refusal?.detail.contains("switched tokens 1140 s ago") == true, "\(tooSoon)")
        #expect(tooSoon.refusal?.detail.contains("next in 60 s") == true, "\(tooSoon)")
        // The connection keeps the token it had.
        #expect(
            connection.authorize(
                authorization: second,
                topic: "com.example.app",
                nowMillis: World.now + 20 * World.minute
            ).authorized != nil
        )

        // 20 minutes after the previous switch the refused token is fine, without verifying it again.
        #expect(
            connection.authorize(
                authorization: third,
                topic: "com.example.app",
                nowMillis: World.now + 21 * World.minute
            ).authorized != nil
        )
        #expect(connection.tokenVerifications == 3)
        #expect(
            connection.authorize(
                authorization: fourth,
                topic: "com.example.app",
                nowMillis: World.now + 40 * World.minute
            ).refusal?.status == 429
        )
        #expect(
            connection.authorize(
                authorization: fourth,
                topic: "com.example.app",
                nowMillis: World.now + 41 * World.minute
            ).authorized != nil
        )
    }

    @Test("the token used just before the current one may still be sent, and does not count as a switch")
    func previousToken() {
        var connection = world.connection()
        let old = world.bearer(iat: World.nowSeconds)
        let new = world.bearer(iat: World.nowSeconds + 1)
        #expect(
            connection.authorize(authorization: old, topic: "com.example.app", nowMillis: World.now).authorized != nil
        )
        #expect(
            connection.authorize(authorization: new, topic: "com.example.app", nowMillis: World.now + 1000).authorized
                != nil
        )
        for second in 2..<10 {
            let token = second.isMultiple(of: 2) ? old : new
            #expect(
                connection.authorize(
                    authorization: token,
                    topic: "com.example.app",
                    nowMillis: World.now + Int64(second) * 1000
                ).authorized != nil
            )
        }
        #expect(connection.tokenVerifications == 2)
        // ... until it expires.
        #expect(
            connection.authorize(authorization: old, topic: "com.example.app", nowMillis: World.now + 3_600_001)
                .refusal?.reason == .expiredProviderToken
        )
    }

    @Test("replacing a token that has expired is always allowed, however recent the last switch")
    func forcedSwitch() {
        var connection = world.connection()
        let stale = world.bearer(iat: World.nowSeconds - 3500)
        let fresh = world.bearer(iat: World.nowSeconds + 60)
        let fresher = world.bearer(iat: World.nowSeconds + 120)
        #expect(
            connection.authorize(authorization: stale, topic: "com.example.app", nowMillis: World.now).authorized != nil
        )
        #expect(
            connection.authorize(authorization: fresh, topic: "com.example.app", nowMillis: World.now + World.minute)
                .authorized != nil
        )
        // `fresh` is in use and valid: a third token 2 minutes later is too soon ...
        #expect(
            connection.authorize(
                authorization: fresher,
                topic: "com.example.app",
                nowMillis: World.now + 2 * World.minute
            ).refusal?.status == 429
        )

        // ... but once the token in use has expired the provider has no choice.
        var second = world.connection()
        let shortLived = world.bearer(iat: World.nowSeconds - 3590)
        #expect(
            second.authorize(authorization: stale, topic: "com.example.app", nowMillis: World.now).authorized != nil
        )
        #expect(
            second.authorize(authorization: shortLived, topic: "com.example.app", nowMillis: World.now + 1000)
                .authorized != nil
        )
        #expect(
            second.authorize(authorization: shortLived, topic: "com.example.app", nowMillis: World.now + 11_000)
                .refusal?.reason == .expiredProviderToken
        )
        #expect(
            second.authorize(authorization: fresh, topic: "com.example.app", nowMillis: World.now + 11_000).authorized
                != nil
        )
    }

    @Test("a connection is bound to its first key: another key of the team or another team is UnrelatedKeyIdInToken")
    func unrelatedKey() {
        var connection = world.connection()
        #expect(
            connection.authorize(authorization: world.bearer(), topic: "com.example.app", nowMillis: World.now)
                .authorized != nil
        )

        let sameTeam = connection.authorize(
            authorization: world.bearer(kid: "KEY0000002", signer: world.keyB),
            topic: "com.example.other",
            nowMillis: World.now + 30 * World.minute
        )
        #expect(sameTeam.refusal?.status == 403)
        #expect(sameTeam.refusal?.reason == .unrelatedKeyIdInToken)
        #expect(sameTeam.refusal?.detail.contains("bound to key \"KEY0000001\" of team \"TEAM000001\"") == true)

        let otherTeam = connection.authorize(
            authorization: world.bearer(kid: "KEY0000003", iss: "TEAM000002", signer: world.keyC),
            topic: "org.example.app",
            nowMillis: World.now + 30 * World.minute
        )
        #expect(otherTeam.refusal?.reason == .unrelatedKeyIdInToken)
        #expect(connection.boundKey?.keyID == "KEY0000001")

        // A bad token of another key is InvalidProviderToken: the signature is checked first.
        let forged = connection.authorize(
            authorization: world.bearer(kid: "KEY0000002"),
            topic: "com.example.other",
            nowMillis: World.now
        )
        #expect(forged.refusal?.reason == .invalidProviderToken)
    }

    @Test(
        "topics: the key's own and their APNs push-type forms",
        arguments: [
            ("com.example.app", true), ("com.example.second", true), ("com.example.app.voip", true),
            ("com.example.app.complication", true), ("com.example.app.pushkit.fileprovider", true),
            ("com.example.app.location-query", true), ("com.example.app.push-type.liveactivity", true),
            ("com.example.app.voip-ptt", true), ("com.example.second.push-type.widgets", true),
            ("com.example.other", false), ("com.example", false), ("com.example.app.unknown", false),
            ("com.example.app.voip.voip", false), ("COM.EXAMPLE.APP", false), (".voip", false), ("", false),
        ]
    )
    func topics(topic: String, allowed: Bool) {
        var connection = world.connection()
        let result = connection.authorize(authorization: world.bearer(), topic: topic, nowMillis: World.now)
        if allowed {
            #expect(result.authorized?.topic == topic)
        } else {
            #expect(result.refusal?.status == 400)
            #expect(result.refusal?.reason == .topicDisallowed)
            #expect(result.refusal?.detail.contains("key \"KEY0000001\" may not push to topic") == true)
            #expect(result.refusal?.detail.contains("com.example.app, com.example.second") == true)
        }
        // Either way the token itself was good.
        #expect(connection.hasValidToken)
    }

    @Test("no apns-topic is MissingTopic on a token connection")
    func missingTopic() {
        var connection = world.connection()
        let result = connection.authorize(authorization: world.bearer(), topic: nil, nowMillis: World.now)
        #expect(result.refusal?.status == 400)
        #expect(result.refusal?.reason == .missingTopic)
    }

    @Test("10,000 distinct bad tokens: each verified once, memory stays bounded, a good token still works")
    func boundedCache() {
        var connection = world.connection()
        let header = Base64URL.encode(#"{"alg":"ES256","kid":"KEY0000001"}"#.utf8)
        for index in 0..<10_000 {
            // Well-formed tokens with a known kid and a signature that does not verify: the
            // expensive kind, every one reaching ECDSA.
            let claims = Base64URL.encode(#"{"iss":"TEAM000001","iat":\#(World.nowSeconds - Int64(index))}"#.utf8)
            let signature = (0..<64).map { UInt8(truncatingIfNeeded: index &* 31 &+ $0 &+ 1) }
            let token = "bearer \(header).\(claims).\(Base64URL.encode(signature))"
            #expect(
                connection.authorize(authorization: token, topic: "com.example.app", nowMillis: World.now).refusal?
                    .reason == .invalidProviderToken
            )
            #expect(connection.recentVerdictCount <= RecentTokenVerdicts.capacity)
        }
        #expect(connection.tokenVerifications == 10_000)
        #expect(connection.recentVerdictCount == RecentTokenVerdicts.capacity)
        #expect(
            connection.authorize(authorization: world.bearer(), topic: "com.example.app", nowMillis: World.now)
                .authorized != nil
        )
    }
}
