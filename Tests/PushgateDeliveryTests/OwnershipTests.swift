import PushgateDelivery
import PushgateModel
import PushgateStore
import PushgateStoreTestKit
import PushgateTestKit
import Testing

/// A device owned under a lease (several nodes on one database): every commit that changes it is
/// fenced with the node's ownership, and a commit the database refuses because another node took
/// the device over makes this node let the device go. The in-memory store plays the database's
/// part (`InMemoryStorage.setOwner`).
@Suite("Delivery: devices owned under a lease, fenced commits, devices released")
struct OwnershipTests {
    static let topic = "com.example.owned"

    /// A device and its app, released by the core and taken over again under lease 1, epoch 1:
    /// what a node does when it claims a device from the store.
    private func adopted(
        _ h: DeliveryHarness,
        _ storage: InMemoryStorage
    ) async throws -> (
        DeliveryHarness.Device, String
    ) {
        let device = try await h.device()
        let token = try await h.register(device, Self.topic)
        try await h.core.release(deviceID: device.id)
        #expect(try await h.core.owners().isEmpty)
        var records = try h.store.load()
        records.devices = records.devices.filter { $0.id == device.id }
        records.registrations = records.registrations.filter { $0.deviceID == device.id }
        records.notifications = records.notifications.filter { $0.deviceID == device.id }
        storage.setOwner(of: device.id, lease: 1, epoch: 1)
        try await h.core.adopt(records, owner: DeviceOwner(lease: 1, epoch: 1))
        #expect(try await h.core.owners() == [device.id: DeviceOwner(lease: 1, epoch: 1)])
        return (device, token)
    }

    @Test(
        "an adopted device takes pushes as before; once another node owns it, a push is refused 503 and the device let go"
    )
    func fencedPush() async throws {
        let storage = InMemoryStorage()
        try await DeliveryHarness.run(storage: storage) { h in
            let (device, token) = try await adopted(h, storage)
            let sink = try await h.connect(device)
            #expect(try await h.push(token, Self.topic) == .delivered)
            _ = await sink.events(count: 1)

            storage.setOwner(of: device.id, lease: 2, epoch: 2)
            await #expect {
                try await h.push(token, Self.topic)
            } throws: { error in
                (error as? Refusal)?.reason == .serviceUnavailable && (error as? Refusal)?.retryAfterSeconds == 1
            }
            // Let go: its stream ended, the core no longer knows its token or its owner.
            try await eventually("the stream ended") { sink.isFinished }
            #expect(try await h.core.owners().isEmpty)
            await #expect {
                try await h.push(token, Self.topic)
            } throws: { error in (error as? Refusal)?.reason == .badDeviceToken }
        }
    }

    @Test("a refused ack leaves the device as well: an ack is a change of the device too")
    func fencedAck() async throws {
        let storage = InMemoryStorage()
        try await DeliveryHarness.run(storage: storage) { h in
            let (device, token) = try await adopted(h, storage)
            let sink = try await h.connect(device)
            #expect(try await h.push(token, Self.topic) == .delivered)
            _ = await sink.events(count: 1)
            storage.setOwner(of: device.id, lease: 2, epoch: 2)
            await #expect(throws: Refusal.self) {
                try await h.core.ack(deviceID: device.id, secret: device.secret, upTo: 1).get()
            }
            try await eventually("the stream ended") { sink.isFinished }
            #expect(try await h.core.owners().isEmpty)
        }
    }

    @Test("a device no node owns in the store passes every fence, as on a gateway alone on its store")
    func unownedInStore() async throws {
        let storage = InMemoryStorage()
        try await DeliveryHarness.run(storage: storage) { h in
            let device = try await h.device()
            let token = try await h.register(device, Self.topic)
            #expect(try await h.core.owners().isEmpty)
            #expect(try await h.push(token, Self.topic) == .stored)
        }
    }
}
