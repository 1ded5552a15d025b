import PushgateCrypto
import PushgateGateway
import PushgateProviderAuth
import PushgateTestKit
import Testing

/// A reload of the provider keys reaches connections that are already open: their next request
/// is checked against the keys now in force (docs/configuration.md "Reloading").
@Suite("Provider keys reloaded under open connections")
struct ProviderKeyReloadTests {
    static let start: Int64 = 1_800_000_000_000
    static let topic = ProviderAuthRouteTests.topic

    @Test("a removed key gets 403 InvalidProviderToken on the open connection; an added key is accepted there")
    func keysFollowTheReload() async throws {
        let keys = ProviderAuthRouteTests.Keys()
        let added = ProviderKeyConfiguration(
            teamID: "TEAM000001",
            keyID: "KEY0000003",
            publicKey: keys.stranger.publicKey.pemRepresentation,
            topics: [Self.topic]
        )
        let kept = ProviderKeyConfiguration(
            teamID: "TEAM000001",
            keyID: "KEY0000002",
            publicKey: keys.second.publicKey.pemRepresentation,
            topics: ["com.example.other"]
        )
        let reread: @Sendable () throws -> GatewayConfiguration = {
            var configuration = GatewayConfiguration()
            configuration.policy.providerKeys = [kept, added]
            return configuration
        }
        try await withGateway(clock: TestClock(Self.start), access: try keys.access(), reread: reread) { gateway in
            let agent = try await API(gateway)
            let device = try await agent.createDevice()
            let token = try await agent.registeredToken(device, topic: Self.topic)
            await agent.close()
            let provider = try await API(gateway)
            defer { Task { await provider.close() } }
            let first = [("authorization", "bearer \(keys.token(keys.first, at: Self.start))")]
            #expect(try await provider.push(token: token, topic: Self.topic, headers: first).status == 200)

            let outcome = try await gateway.assembled.reloader.reload(trigger: "test").get()
            #expect(outcome.reloaded == ["providerKeys (2)", "scheduler"])

            let removed = try await provider.push(token: token, topic: Self.topic, headers: first)
            #expect(
                removed.status == 403 && removed.json["reason"] as? String == "InvalidProviderToken",
                "\(removed.text)"
            )
            let stranger = [
                ("authorization", "bearer \(keys.token(keys.stranger, keyID: "KEY0000003", at: Self.start))")
            ]
            let accepted = try await provider.push(token: token, topic: Self.topic, headers: stranger)
            #expect(accepted.status == 200, "\(accepted.text)")
        }
    }
}
