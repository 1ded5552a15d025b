import PushgateDelivery
import PushgateModel
import PushgateStoreTestKit
import PushgateTestKit
import Testing

/// The memory waiting notifications take, all devices together (the security review: one
/// provider could make the gateway hold pushes without bound, `apns-expiration` up to Int64.max,
/// every payload in memory).
@Suite("Queued notification budget", .timeLimit(.minutes(1)))
struct QueuedBudgetTests {
    static let topic = "com.example.budget"
    static let alert = QueuedNotificationBudget.cost(payloadBytes: #"{"aps":{"alert":"hi"}}"#.utf8.count)
    static let silent = QueuedNotificationBudget.cost(payloadBytes: #"{"aps":{"content-available":1}}"#.utf8.count)

    @Test(
        "every way a notification enters and leaves memory moves the budget by its cost: stored, held, released, coalesced, acked, expired, refused by a failed commit, unregistered, deleted with its device, loaded after a restart"
    )
    func everyPath() async throws {
        let storage = InMemoryStorage()
        try await DeliveryHarness.run(storage: storage) { h in
            let budget = h.core.queuedBudget
            let device = try await h.device()
            let token = try await h.register(device, Self.topic)
            #expect(try await h.push(token, Self.topic) == .stored)
            #expect(budget.bytes == Self.alert)
            #expect(try await h.silent(token, Self.topic) == .held)
            #expect(budget.bytes == Self.alert + Self.silent)
            #expect(try await h.push(token, Self.topic, collapseID: "c") == .stored)
            #expect(try await h.push(token, Self.topic, collapseID: "c") == .coalesced)
            #expect(budget.bytes == 2 * Self.alert + Self.silent)
            h.store.failNext { $0.contains { if case .enqueue = $0 { true } else { false } } }
            await #expect(throws: Refusal.self) { _ = try await h.push(token, Self.topic) }
            #expect(budget.bytes == 2 * Self.alert + Self.silent, "a refused push takes nothing")
            let expiring = h.clock.nowMillis() / 1000 + 1
            #expect(try await h.push(token, Self.topic, expiration: .at(epochSeconds: expiring)) == .stored)
            #expect(budget.bytes == 3 * Self.alert + Self.silent)
            h.clock.advance(by: 2_000)

            // Connected: the held one is released (no change), the expired one dropped.
            let sink = try await h.connect(device)
            let events = await sink.events(count: 3)
            #expect(budget.bytes == 2 * Self.alert + Self.silent)
            try await h.core.ack(deviceID: device.id, secret: device.secret, upTo: events.last!.seq).get()
            #expect(budget.bytes == 0)

            // Unregistered with one stored; deleted with one held and one stored.
            let other = try await h.device()
            let otherToken = try await h.register(other, Self.topic)
            #expect(try await h.push(otherToken, Self.topic) == .stored)
            try await h.core.unregister(deviceID: other.id, secret: other.secret, token: otherToken).get()
            #expect(budget.bytes == 0)
            let doomed = try await h.device()
            let doomedToken = try await h.register(doomed, Self.topic)
            #expect(try await h.push(doomedToken, Self.topic) == .stored)
            #expect(try await h.silent(doomedToken, Self.topic) == .held)
            #expect(budget.bytes == Self.alert + Self.silent)
            try await h.core.deleteDevice(deviceID: doomed.id, secret: doomed.secret).get()
            #expect(budget.bytes == 0)

            // Left for the restart: one unacked, one held.
            #expect(try await h.push(token, Self.topic) == .delivered)
            let third = try await h.device()
            let thirdToken = try await h.register(third, Self.topic)
            #expect(try await h.silent(thirdToken, Self.topic) == .held)
        }
        try await DeliveryHarness.run(storage: storage) { h in
            #expect(h.core.queuedBudget.bytes == Self.alert + Self.silent)
        }
    }

    @Test(
        "past the budget a push gets 429 TooManyRequests naming the setting, not counted against the provider; an ack makes room"
    )
    func full() async throws {
        try await DeliveryHarness.run({ $0.queuedNotificationBudgetBytes = 3 * Self.alert }) { h in
            let device = try await h.device()
            let token = try await h.register(device, Self.topic)
            for _ in 0..<3 { #expect(try await h.push(token, Self.topic) == .stored) }
            do {
                _ = try await h.push(token, Self.topic)
                Issue.record("a fourth push fits a budget of three")
            } catch let refusal as Refusal {
                #expect(refusal.reason == .tooManyRequests && refusal.reason.isGatewayLimit)
                #expect(refusal.detail.contains("queuedNotificationBudgetBytes"), "\(refusal.detail)")
            }
            let sink = try await h.connect(device)
            let events = await sink.events(count: 3)
            try await h.core.ack(deviceID: device.id, secret: device.secret, upTo: events[0].seq).get()
            #expect(try await h.push(token, Self.topic) == .delivered)
        }
    }
}
