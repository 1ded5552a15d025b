import Foundation
import NIOCore
import PushgateCrypto
import PushgateDelivery
import PushgateGateway
import PushgateProviderAuth
import PushgateTestKit
import PushgateTransport
import Testing

/// Provider authentication through the real server: the reasons reach the client as APNs sends
/// them, the connection's stream limit follows APNs' gating, draining answers `503 Shutdown`, and
/// too many errors end the connection with a GOAWAY reason. (Every token rule is tested in
/// isolation in PushgateProviderAuthTests.)
@Suite("Provider authentication through the gateway")
struct ProviderAuthRouteTests {
    static let start: Int64 = 1_800_000_000_000
    static let topic = "com.example.auth"

    struct Keys {
        let first = try! ES256PrivateKey.generate()
        let second = try! ES256PrivateKey.generate()
        let stranger = try! ES256PrivateKey.generate()

        func access(maxErrors: Int = 100, registrationSecret: String? = nil) throws -> AccessConfiguration {
            let keyring = try ProviderKeyring(keys: [
                ProviderKey(
                    teamID: "TEAM000001",
                    keyID: "KEY0000001",
                    publicKey: first.publicKey,
                    topics: [ProviderAuthRouteTests.topic]
                ),
                ProviderKey(
                    teamID: "TEAM000001",
                    keyID: "KEY0000002",
                    publicKey: second.publicKey,
                    topics: ["com.example.other"]
                ),
            ])
            return AccessConfiguration(
                providers: ProviderAuthenticator(keyring: keyring, acceptsClientCertificates: false),
                registrationSecret: registrationSecret,
                maxConsecutiveProviderErrors: maxErrors
            )
        }

        func token(_ key: ES256PrivateKey, keyID: String = "KEY0000001", at millis: Int64) -> String {
            var signer = ProviderTokenSigner(privateKey: key, keyID: keyID, teamID: "TEAM000001")
            return signer.token(nowMillis: millis)
        }
    }

    /// A registered token to push to, made on a connection of its own (a device connection).
    static func deviceToken(_ gateway: RunningGateway) async throws -> String {
        let agent = try await API(gateway)
        defer { Task { await agent.close() } }
        let device = try await agent.createDevice()
        return try await agent.registeredToken(device, topic: topic)
    }

    @Test("no token: 403 MissingProviderToken and one stream; a valid token: 200 and 1,000 streams")
    func gating() async throws {
        let keys = Keys()
        let clock = TestClock(Self.start)
        try await withGateway(clock: clock, access: try keys.access()) { gateway in
            let token = try await Self.deviceToken(gateway)
            let provider = try await API(gateway)
            let missing = try await provider.push(token: token, topic: Self.topic)
            #expect(missing.status == 403)
            #expect(missing.json["reason"] as? String == "MissingProviderToken")
            #expect(missing.apnsID != nil)
            #expect(try await provider.connection.serverMaxConcurrentStreams() == 1)

            let bad = try await provider.push(
                token: token,
                topic: Self.topic,
                headers: [("authorization", "bearer \(keys.token(keys.stranger, at: Self.start))")]
            )
            #expect(bad.status == 403)
            #expect(bad.json["reason"] as? String == "InvalidProviderToken")
            #expect(try await provider.connection.serverMaxConcurrentStreams() == 1)

            let good = try await provider.push(
                token: token,
                topic: Self.topic,
                headers: [("authorization", "bearer \(keys.token(keys.first, at: Self.start))")]
            )
            #expect(good.status == 200, "\(good.text)")
            #expect(good.disposition == "stored")
            #expect(try await provider.connection.serverMaxConcurrentStreams() == 1000)
            await provider.close()
        }
    }

    @Test("a method other than POST is 405 MethodNotAllowed on its head, before credentials and topic are asked for")
    func wrongMethodFirst() async throws {
        let keys = Keys()
        try await withGateway(clock: TestClock(Self.start), access: try keys.access()) { gateway in
            let token = try await Self.deviceToken(gateway)
            let provider = try await API(gateway)
            let id = "8a5c3ea8-6e0c-4f45-a9a1-2e4b0b4b3f11"
            for (method, path, body) in [
                ("GET", "/3/device/\(token)", nil), ("PUT", "/3/device/\(token)", "{}"), ("GET", "/3/device/zz", nil),
            ] {
                let reply = try await provider.send(method, path, headers: [("apns-id", id)], body: body)
                #expect(reply.status == 405, "\(method) \(path): \(reply.text)")
                #expect(reply.json["reason"] as? String == "MethodNotAllowed", "\(method) \(path)")
                #expect(reply.apnsID == id)
                #expect(reply.headers.first(name: "allow") == "POST")
            }
            await provider.close()
        }
    }

    @Test("APNs' token reasons reach the client: expired, topic not allowed, too many updates, unrelated key")
    func reasons() async throws {
        let keys = Keys()
        let clock = TestClock(Self.start)
        try await withGateway(clock: clock, access: try keys.access()) { gateway in
            let token = try await Self.deviceToken(gateway)
            let provider = try await API(gateway)
            func push(_ jwt: String, topic: String = Self.topic) async throws -> (Int, String?) {
                let reply = try await provider.push(
                    token: token,
                    topic: topic,
                    headers: [("authorization", "bearer \(jwt)")]
                )
                return (reply.status, reply.json["reason"] as? String)
            }
            let expired = keys.token(keys.first, at: Self.start - 3_601_000)
            #expect(try await push(expired) == (403, "ExpiredProviderToken"))

            let current = keys.token(keys.first, at: Self.start)
            #expect(try await push(current) == (200, nil))
            #expect(try await push(current, topic: "com.example.elsewhere") == (400, "TopicDisallowed"))

            // Token updates: one is fine, a second within 20 minutes is not (APNs: once per 20 min).
            clock.set(Self.start + 600_000)
            let refreshed = keys.token(keys.first, at: Self.start + 600_000)
            #expect(try await push(refreshed) == (200, nil))
            clock.set(Self.start + 900_000)
            #expect(
                try await push(keys.token(keys.first, at: Self.start + 900_000)) == (429, "TooManyProviderTokenUpdates")
            )
            #expect(try await push(refreshed) == (200, nil))

            // Another key of the same team cannot join a connection bound to the first.
            let other = keys.token(keys.second, keyID: "KEY0000002", at: Self.start + 600_000)
            #expect(try await push(other, topic: "com.example.other") == (403, "UnrelatedKeyIdInToken"))

            // The token ages out: refused, and a fresh one (a switch from an expired token) works.
            clock.set(Self.start + 600_000 + 3_601_000)
            #expect(try await push(refreshed) == (403, "ExpiredProviderToken"))
            #expect(try await push(keys.token(keys.first, at: Self.start + 600_000 + 3_601_000)) == (200, nil))
            await provider.close()
        }
    }

    @Test("a device connection lifts the stream limit by proving its secret")
    func deviceConnectionsAreNotStuckAtOneStream() async throws {
        let keys = Keys()
        try await withGateway(access: try keys.access()) { gateway in
            let agent = try await API(gateway)
            let device = try await agent.createDevice()
            #expect(try await agent.connection.serverMaxConcurrentStreams() == 1)
            let wrong = try await agent.device(
                Device(id: device.id, secret: "wrong"),
                "POST",
                "ack",
                body: #"{"upTo":0}"#
            )
            #expect(wrong.status == 401)
            #expect(try await agent.connection.serverMaxConcurrentStreams() == 1)
            // The event stream and an ack at once need two streams.
            let events = try await agent.openEvents(device)
            #expect(events.status == 200)
            #expect(try await agent.connection.serverMaxConcurrentStreams() == 1000)
            await agent.close()
        }
    }

    @Test("with a registration secret, creating a device needs it")
    func registrationSecret() async throws {
        let secret = "s3cret-registration-value"
        try await withGateway(access: AccessConfiguration(registrationSecret: secret)) { gateway in
            let agent = try await API(gateway)
            let refused = try await agent.send("POST", "/v1/devices")
            #expect(refused.status == 401)
            #expect((refused.json["detail"] as? String)?.contains("registration secret") == true)
            let wrong = try await agent.send("POST", "/v1/devices", headers: [("authorization", "bearer nope")])
            #expect(wrong.status == 401)
            let created = try await agent.send("POST", "/v1/devices", headers: [("authorization", "bearer \(secret)")])
            #expect(created.status == 201)
            await agent.close()
        }
    }

    @Test("while draining, provider requests get 503 Shutdown with an apns-id")
    func drainingAnswersShutdown() async throws {
        try await withGateway { gateway in
            let token = try await Self.deviceToken(gateway)
            let provider = try await API(gateway)
            #expect(try await provider.push(token: token, topic: Self.topic).status == 200)
            gateway.readiness.beginDraining()
            let id = "8a5c3ea8-6e0c-4f45-a9a1-2e4b0b4b3f10"
            let refused = try await provider.push(token: token, topic: Self.topic, apnsID: id)
            #expect(refused.status == 503)
            #expect(refused.json["reason"] as? String == "Shutdown")
            #expect(refused.apnsID == id)
            await provider.close()
        }
    }

    @Test(
        "a push admitted on its head before the drain began is in flight: its body arriving during the drain is stored and answered 200"
    )
    func inFlightThroughTheDrain() async throws {
        try await withGateway { gateway in
            let token = try await Self.deviceToken(gateway)
            let client = try await RawHTTP2Client.connect(port: gateway.port, group: gateway.group)
            let head: [(String, String)] = [
                (":method", "POST"), (":scheme", "http"), (":path", "/3/device/\(token)"), (":authority", "localhost"),
                ("apns-topic", Self.topic),
            ]
            try await client.sendHeaders(streamID: 1, head, endStream: false)
            try await client.sendPing()
            // The PING's ack comes after the head has been admitted.
            _ = try await client.frames { $0.contains { $0.kind == .ping && $0.ack } }
            gateway.readiness.beginDraining()
            try await client.sendData(streamID: 1, Array(#"{"aps":{"alert":"in flight"}}"#.utf8), endStream: true)
            let frames = try await client.frames { $0.answered(1) }.filter { $0.streamID == 1 }
            // After the encoder's table size update to 0 (0x20), HPACK's static index 8:
            // `:status: 200`.
            let status = frames.first { $0.kind == .headers }.map { $0.payload.drop { $0 == 0x20 }.first }
            #expect(status == 0x88, "\(frames)")
            await client.close()
        }
    }

    @Test(
        "too many errors in a row end the connection with GOAWAY {\"reason\": ...}; 410s and a full device queue's 429s do not count"
    )
    func tooManyErrors() async throws {
        let keys = Keys()
        let clock = TestClock(Self.start)
        var delivery = DeliveryConfiguration()
        delivery.maxQueuedPerDevice = 1
        try await withGateway(clock: clock, access: try keys.access(maxErrors: 3), delivery: delivery) { gateway in
            let agent = try await API(gateway)
            let device = try await agent.createDevice()
            let token = try await agent.registeredToken(device, topic: Self.topic)
            // Another device's registration of the topic, unregistered: its pushes get 410.
            let other = try await agent.createDevice()
            let gone = try await agent.registeredToken(other, topic: Self.topic)
            #expect(try await agent.unregister(other, token: gone).status == 204)
            await agent.close()

            let provider = try await API(gateway)
            let auth = [("authorization", "bearer \(keys.token(keys.first, at: Self.start))")]
            let unknown = String(repeating: "ab", count: 32)
            // Two errors, a success (resets), two errors and any number of 410s: still open.
            for _ in 0..<2 {
                #expect(try await provider.push(token: unknown, topic: Self.topic, headers: auth).status == 400)
            }
            #expect(try await provider.push(token: token, topic: Self.topic, headers: auth).status == 200)
            for _ in 0..<2 {
                #expect(try await provider.push(token: unknown, topic: Self.topic, headers: auth).status == 400)
            }
            for _ in 0..<5 {
                let reply = try await provider.push(token: gone, topic: Self.topic, headers: auth)
                #expect(reply.status == 410)
            }
            // The device's queue is full (the push that succeeded is stored): the gateway's limit.
            for _ in 0..<5 {
                let reply = try await provider.push(token: token, topic: Self.topic, headers: auth)
                #expect(reply.status == 429)
                #expect(reply.json["reason"] as? String == "TooManyRequests")
            }
            // The third error in a row: answered, then GOAWAY with its reason.
            let third = try await provider.push(token: unknown, topic: Self.topic, headers: auth)
            #expect(third.status == 400)
            let goAway = try await provider.connection.goAwayReceived.get()
            #expect(goAway.debugData == #"{"reason":"BadDeviceToken"}"#)
            try await provider.connection.channel.closeFuture.get()
        }
    }

    @Test(
        "token updates too often count as errors: the connection ends with GOAWAY TooManyProviderTokenUpdates",
        .timeLimit(.minutes(1))
    )
    func tokenChurnEndsConnection() async throws {
        let keys = Keys()
        let clock = TestClock(Self.start)
        try await withGateway(clock: clock, access: try keys.access(maxErrors: 2)) { gateway in
            let token = try await Self.deviceToken(gateway)
            let provider = try await API(gateway)
            func push(at millis: Int64) async throws -> Int {
                try await provider.push(
                    token: token,
                    topic: Self.topic,
                    headers: [("authorization", "bearer \(keys.token(keys.first, at: millis))")]
                ).status
            }
            #expect(try await push(at: Self.start) == 200)
            clock.set(Self.start + 600_000)
            #expect(try await push(at: Self.start + 600_000) == 200)
            clock.set(Self.start + 900_000)
            #expect(try await push(at: Self.start + 900_000) == 429)
            #expect(try await push(at: Self.start + 901_000) == 429)
            let goAway = try await provider.connection.goAwayReceived.get()
            #expect(goAway.debugData == #"{"reason":"TooManyProviderTokenUpdates"}"#)
            try await provider.connection.channel.closeFuture.get()
        }
    }
}
