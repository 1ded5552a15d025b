import NIOConcurrencyHelpers
import NIOCore
import PushgateDelivery
import PushgateModel
import PushgateStore
import PushgateStoreTestKit
import PushgateTestKit
import Testing

/// PRODUCT.md section 8: an ack's answer means its deletions are on disk, so that a gateway killed
/// right after it never delivers those notifications again. That holds for `POST .../ack` and for
/// an event stream resumed with `Last-Event-ID` (its 200 answers that ack), whether the ack
/// deletes anything new or repeats one still on its way to the disk. The crash-loop soak
/// (Tests/Soak) found both answered before the commit: acked notifications came back after a
/// SIGKILL.
@Suite("Acks are answered once on disk", .timeLimit(.minutes(1)))
struct AckDurabilityTests {
    static let topic = "com.example.news"

    /// A device with three notifications delivered on a stream, not yet acknowledged.
    private func threeDelivered(_ h: DeliveryHarness) async throws -> DeliveryHarness.Device {
        let device = try await h.device()
        let token = try await h.register(device, Self.topic)
        for _ in 0..<3 { _ = try await h.push(token, Self.topic) }
        let sink = try await h.connect(device)
        #expect(await sink.events(count: 3).map(\.seq) == [1, 2, 3])
        return device
    }

    private static func isAck(_ commands: [StoreCommand]) -> Bool {
        commands.contains { if case .ack = $0 { true } else { false } }
    }

    /// Whether `future` has completed by the time the shard's loop has run everything queued
    /// on it before a later request (the harness has one loop).
    private func completed(_ future: EventLoopFuture<some Sendable>, _ h: DeliveryHarness) async throws -> Bool {
        let done = NIOLockedValueBox(false)
        future.whenComplete { _ in done.withLockedValue { $0 = true } }
        _ = try await h.core.statistics()
        return done.withLockedValue { $0 }
    }

    @Test("a stream resumed with Last-Event-ID opens once its ack is on disk")
    func resumedStreamWaitsForItsAck() async throws {
        try await DeliveryHarness.run { h in
            let device = try await threeDelivered(h)
            h.store.holdNext(where: Self.isAck)
            let opened = h.core.openStream(deviceID: device.id, secret: device.secret, lastEventID: 3)
            await h.store.waitUntilHeld()
            #expect(try await !completed(opened, h), "the stream's 200 went out before its ack was committed")
            h.store.release(failing: false)
            _ = try await opened.get()
            #expect(try await h.core.statistics().queued == 0)
        }
    }

    @Test(
        "a stream resumed with Last-Event-ID whose ack cannot be committed is refused, and the device is not left connected"
    )
    func resumedStreamRefusedWhenItsAckFails() async throws {
        try await DeliveryHarness.run { h in
            let device = try await threeDelivered(h)
            h.store.failNext(where: Self.isAck, kind: .unavailable)
            let refused = await #expect(throws: Refusal.self) {
                _ = try await h.core.openStream(deviceID: device.id, secret: device.secret, lastEventID: 3).get()
            }
            #expect(refused?.reason == .serviceUnavailable)
            #expect(try await h.core.statistics().connectedDevices == 0)
            // The agent tries again with the same Last-Event-ID: the deletions go to disk then.
            _ = try await h.connect(device, lastEventID: 3)
            let deleted = h.store.passed.flatMap { $0 }.flatMap { command -> [UInt64] in
                if case .ack(_, let ids) = command { return ids }
                return []
            }
            #expect(deleted.count == 3)
        }
    }

    @Test("an ack repeating one still on its way to the disk is answered after it")
    func repeatedAckWaitsForTheFirst() async throws {
        try await DeliveryHarness.run { h in
            let device = try await threeDelivered(h)
            h.store.holdNext(where: Self.isAck)
            let first = h.core.ack(deviceID: device.id, secret: device.secret, upTo: 3)
            await h.store.waitUntilHeld()
            let repeated = h.core.ack(deviceID: device.id, secret: device.secret, upTo: 3)
            #expect(try await !completed(repeated, h), "answered while the deletions it confirms were not on disk")
            // So is a stream resumed with the same Last-Event-ID.
            let resumed = h.core.openStream(deviceID: device.id, secret: device.secret, lastEventID: 3)
            #expect(
                try await !completed(resumed, h),
                "the resumed stream's 200 went out before the ack it repeats was committed"
            )
            h.store.release(failing: false)
            try await first.get()
            try await repeated.get()
            _ = try await resumed.get()
        }
    }

    @Test(
        "an ack made while an earlier one is on its way to the disk fails with it: its answer covers the earlier deletions too"
    )
    func laterAckFailsWithTheEarlier() async throws {
        try await DeliveryHarness.run { h in
            let device = try await threeDelivered(h)
            h.store.holdNext(where: Self.isAck)
            let first = h.core.ack(deviceID: device.id, secret: device.secret, upTo: 2)
            await h.store.waitUntilHeld()
            let later = h.core.ack(deviceID: device.id, secret: device.secret, upTo: 3)
            h.store.release(failing: true)
            await #expect(throws: Refusal.self) { try await first.get() }
            await #expect(throws: Refusal.self, "answered 204 although seqs 1 and 2 are not deleted on disk") {
                try await later.get()
            }
            // Repeated, it commits everything.
            try await h.core.ack(deviceID: device.id, secret: device.secret, upTo: 3).get()
            let deleted = h.store.passed.flatMap { $0 }.flatMap { command -> [UInt64] in
                if case .ack(_, let ids) = command { return ids }
                return []
            }
            #expect(Set(deleted).count == 3)
        }
    }
}
