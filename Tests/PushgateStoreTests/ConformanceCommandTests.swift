import Foundation
import PushgateModel
import PushgateStore
import PushgateStoreTestKit
import Testing

/// What every store does with each command, whichever backend it runs on (see
/// `StoreBackendKind`): commands round-trip through `load()`, refusals fail their batch only.
@Suite("Store conformance: commands")
struct ConformanceCommandTests {
    @Test("a new store is empty", arguments: StoreBackendKind.allCases)
    func newStoreIsEmpty(_ backend: StoreBackendKind) async throws {
        try await withStore(backend) { store throws in
            #expect(
                try store.load() == StoreSnapshot(devices: [], registrations: [], notifications: [], maxAcceptanceID: 0)
            )
        }
    }

    @Test("createDevice, register, enqueue round-trip through load()", arguments: StoreBackendKind.allCases)
    func roundTrip(_ backend: StoreBackendKind) async throws {
        try await withStore(backend) { store in
            let d1 = device("dev-1", createdAt: 111)
            let d2 = device("dev-2", createdAt: 222, lastSeq: 7)
            let r1 = registration(1, device: "dev-1", topic: "com.example.news", createdAt: 333)
            let r2 = registration(2, device: "dev-2", topic: "com.example.chat", createdAt: 444)
            let n1 = notification(5, device: "dev-1", collapseID: "c1", payloadSize: 300, seq: nil)
            let n2 = notification(
                3,
                device: "dev-2",
                tokenNumber: 2,
                topic: "com.example.chat",
                payloadSize: 4096,
                seq: 5
            )
            try await store.commit([.createDevice(d2), .createDevice(d1)])
            try await store.commit([.register(r2), .register(r1)])
            try await store.commit([.enqueue(n1), .enqueue(n2)])

            let snapshot = try store.load()
            // dev-2 was created with lastSeq 7, above its stored seq 5; dev-1's push is held (no seq).
            #expect(snapshot.devices == [d1, d2])
            #expect(snapshot.registrations == [r1, r2])
            #expect(snapshot.notifications == [n2, n1])  // by acceptance id
            #expect(snapshot.maxAcceptanceID == 5)
            #expect(snapshot.notifications[1].push.payload.count == 300)
            #expect(snapshot.notifications[0].push.payload.count == 4096)
        }
    }

    @Test(
        "a Web Push subscription (with and without a key) and its messages (urgency, topic, empty body) round-trip",
        arguments: StoreBackendKind.allCases
    )
    func webPushRoundTrip(_ backend: StoreBackendKind) async throws {
        try await withStore(backend) { store in
            let key = [UInt8(4)] + (1...64).map { UInt8($0) }
            let restricted = RegistrationRecord(
                token: token(1),
                deviceID: "d",
                topic: "inbox",
                createdAt: 10,
                kind: .webpush,
                applicationServerKey: key
            )
            let open = RegistrationRecord(token: token(2), deviceID: "d", topic: "feed", createdAt: 11, kind: .webpush)
            var messages: [AcceptedPush] = []
            for (index, urgency) in WebPushUrgency.allCases.enumerated() {
                var message = notification(
                    UInt64(index + 1),
                    device: "d",
                    topic: "inbox",
                    seq: index % 2 == 0 ? nil : 9
                )
                message.push = Push(
                    deviceToken: token(1),
                    apnsID: message.push.apnsID,
                    topic: "inbox",
                    pushType: .webpush,
                    priority: urgency.priority,
                    collapseID: index == 0 ? nil : "topic\(index)",
                    payload: index == 3 ? [] : [0, 1, 2, 0xFF],
                    urgency: urgency
                )
                messages.append(message)
            }
            try await store.commit([.createDevice(device("d")), .register(restricted), .register(open)])
            try await store.commit(messages.map(StoreCommand.enqueue))
            let snapshot = try store.load()
            #expect(snapshot.registrations == [restricted, open])
            #expect(snapshot.notifications == messages)
            #expect(snapshot.notifications.map(\.push.urgency) == WebPushUrgency.allCases)
        }
    }

    @Test("an empty batch succeeds", arguments: StoreBackendKind.allCases)
    func emptyBatch(_ backend: StoreBackendKind) async throws {
        try await withStore(backend) { store in
            try await store.commit([])
            #expect(try store.load().devices.isEmpty)
        }
    }

    @Test(
        "a store of one gateway has no owners: a fence holds, and the batch applies (PostgreSQL, a cluster's store, checks the owner: PostgresBackendTests)",
        arguments: [StoreBackendKind.sqlite, .memory]
    )
    func fenceWithoutOwners(_ backend: StoreBackendKind) async throws {
        try await withStore(backend) { store in
            try await store.commit([.createDevice(device("d"))])
            try await store.commit([.fence(deviceID: "d", lease: 7, epoch: 3), .enqueue(notification(1, device: "d"))])
            #expect(try store.load().notifications.map(\.acceptanceID) == [1])
        }
    }

    @Test("unregister sets unregisteredAt once; unknown tokens are a no-op", arguments: StoreBackendKind.allCases)
    func unregister(_ backend: StoreBackendKind) async throws {
        try await withStore(backend) { store in
            try await store.commit([.createDevice(device("d")), .register(registration(1, device: "d", topic: "t"))])
            try await store.commit([.unregister(token: token(1), at: 5_000)])
            #expect(try store.load().registrations == [registration(1, device: "d", topic: "t", unregisteredAt: 5_000)])
            try await store.commit([.unregister(token: token(1), at: 6_000), .unregister(token: token(99), at: 6_000)])
            #expect(try store.load().registrations == [registration(1, device: "d", topic: "t", unregisteredAt: 5_000)])
        }
    }

    @Test("forgetRegistrations removes unregistered registrations only", arguments: StoreBackendKind.allCases)
    func forgetRegistrations(_ backend: StoreBackendKind) async throws {
        try await withStore(backend) { store in
            try await store.commit([
                .createDevice(device("d")),
                .register(registration(1, device: "d", topic: "t")),
                .register(registration(2, device: "d", topic: "u")),
                .register(registration(3, device: "d", topic: "v")),
            ])
            try await store.commit([.unregister(token: token(1), at: 5_000), .unregister(token: token(2), at: 5_000)])
            try await store.commit([.forgetRegistrations(tokens: [token(1), token(3), token(99)])])
            #expect(
                try store.load().registrations == [
                    registration(2, device: "d", topic: "u", unregisteredAt: 5_000),
                    registration(3, device: "d", topic: "v"),
                ]
            )
            try await store.commit([.forgetRegistrations(tokens: [token(2)])])
            #expect(try store.load().registrations == [registration(3, device: "d", topic: "v")])
        }
    }

    @Test("assignSeq gives a held notification its sequence number", arguments: StoreBackendKind.allCases)
    func assignSeq(_ backend: StoreBackendKind) async throws {
        try await withStore(backend) { store in
            try await store.commit([
                .createDevice(device("d")),
                .enqueue(notification(1, device: "d")),
                .enqueue(notification(2, device: "d")),
            ])
            try await store.commit([.assignSeq(acceptanceID: 2, seq: 1), .assignSeq(acceptanceID: 77, seq: 9)])
            let seqs = try store.load().notifications.map(\.seq)
            #expect(seqs == [nil, 1])
        }
    }

    @Test("remove deletes by acceptance id and ignores unknown ids", arguments: StoreBackendKind.allCases)
    func remove(_ backend: StoreBackendKind) async throws {
        try await withStore(backend) { store in
            try await store.commit(
                [.createDevice(device("d"))] + (1...5).map { .enqueue(notification($0, device: "d")) }
            )
            try await store.commit([.remove(acceptanceIDs: [2, 4, 40])])
            try await store.commit([.remove(acceptanceIDs: [5])])
            try await store.commit([.remove(acceptanceIDs: [])])
            #expect(try store.load().notifications.map(\.acceptanceID) == [1, 3])
        }
    }

    @Test(
        "ack deletes exactly the notifications it names; it writes no device row",
        arguments: StoreBackendKind.allCases
    )
    func ack(_ backend: StoreBackendKind) async throws {
        try await withStore(backend) { store in
            try await store.commit([
                .createDevice(device("d")), .createDevice(device("other")),
                .enqueue(notification(1, device: "d", seq: 1)),
                .enqueue(notification(2, device: "d", seq: 2)),
                .enqueue(notification(3, device: "d")),  // held: no seq, never acked
                .enqueue(notification(4, device: "d", seq: 3)),
                .enqueue(notification(5, device: "other", seq: 1)),
            ])
            let devicesBefore = try store.load().devices
            try await store.commit([.ack(deviceID: "d", acceptanceIDs: [1, 2])])
            var snapshot = try store.load()
            #expect(snapshot.notifications.map(\.acceptanceID) == [3, 4, 5])
            #expect(snapshot.devices == devicesBefore)

            try await store.commit([.ack(deviceID: "d", acceptanceIDs: [])])
            try await store.commit([.ack(deviceID: "d", acceptanceIDs: [1, 2])])  // again: no-op
            #expect(try store.load() == snapshot)

            try await store.commit([.ack(deviceID: "d", acceptanceIDs: [4])])
            snapshot = try store.load()
            #expect(snapshot.notifications.map(\.acceptanceID) == [3, 5])

            try await store.commit([.ack(deviceID: "d", acceptanceIDs: [99, UInt64(Int64.max) + 1])])  // unknown: no-op
            #expect(try store.load() == snapshot)
        }
    }

    @Test(
        "lastSeq covers every seq ever assigned: reserved, stored, or removed unacked; never lowered",
        arguments: StoreBackendKind.allCases
    )
    func lastSeq(_ backend: StoreBackendKind) async throws {
        try await withStore(backend) { store in
            try await store.commit([
                .createDevice(device("d")),
                .enqueue(notification(1, device: "d", seq: 5)),
                .enqueue(notification(2, device: "d", seq: nil)),
                .enqueue(notification(3, device: "d", seq: 3)),
            ])
            #expect(try store.load().devices.first?.lastSeq == 5)
            // Acked rows are gone: the reservation made with the seqs is what remains of them.
            try await store.commit([.reserveSeqs(deviceID: "d", through: 16), .assignSeq(acceptanceID: 2, seq: 9)])
            try await store.commit([.ack(deviceID: "d", acceptanceIDs: [1, 2, 3])])
            let snapshot = try store.load()
            #expect(snapshot.devices.first?.lastSeq == 16)
            #expect(snapshot.notifications.isEmpty)
            try await store.commit([.reserveSeqs(deviceID: "d", through: 8)])  // lower: no change
            #expect(try store.load().devices.first?.lastSeq == 16)
            // An expired (removed, never acked) notification's seq is not given out again.
            try await store.commit([.enqueue(notification(4, device: "d", seq: 20)), .remove(acceptanceIDs: [4])])
            #expect(try store.load().devices.first?.lastSeq == 20)
        }
    }

    @Test(
        "bucket levels and app states survive a reload; unregister and deleteDevice remove their buckets",
        arguments: StoreBackendKind.allCases
    )
    func schedulerState(_ backend: StoreBackendKind) async throws {
        try await withStore(backend) { store in
            let d = BucketRecord.deviceKey("d")
            let a1 = BucketRecord.appKey(token(1))
            let a2 = BucketRecord.appKey(token(2))
            try await store.commit([
                .createDevice(device("d")), .createDevice(device("e")),
                .register(registration(1, device: "d", topic: "a")),
                .register(registration(2, device: "d", topic: "b")),
                .register(registration(3, device: "e", topic: "a")),
                .saveBuckets([
                    BucketRecord(key: d, level: 5, at: 10), BucketRecord(key: a1, level: 1, at: 10),
                    BucketRecord(key: a2, level: 2, at: 10),
                    BucketRecord(key: BucketRecord.appKey(token(3)), level: 3, at: 10),
                ]),
                .setAppState(token: token(1), state: .terminated),
            ])
            try await store.commit([.saveBuckets([BucketRecord(key: d, level: 7, at: 20)])])  // replaces
            var snapshot = try store.load()
            #expect(snapshot.buckets.first { $0.key == d } == BucketRecord(key: d, level: 7, at: 20))
            #expect(snapshot.buckets.count == 4)
            #expect(snapshot.registrations.first { $0.token == token(1) }?.appState == .terminated)
            #expect(snapshot.registrations.first { $0.token == token(2) }?.appState == nil)

            try await store.commit([.unregister(token: token(2), at: 30)])
            snapshot = try store.load()
            #expect(!snapshot.buckets.contains { $0.key == a2 })
            try await store.commit([.deleteDevice(id: "d", at: 40, acceptanceIDs: [])])
            snapshot = try store.load()
            #expect(snapshot.buckets.map(\.key) == [BucketRecord.appKey(token(3))])
        }
    }

    @Test(
        "fetch figures and fetch windows survive a reload; close marks, forget, unregister and deleteDevice remove",
        arguments: StoreBackendKind.allCases
    )
    func fetchStatesAndWindows(_ backend: StoreBackendKind) async throws {
        try await withStore(backend) { store in
            let first = FetchStateRecord(
                token: token(1),
                results: 0b1101,
                resultCount: 2,
                penaltyUntil: 500,
                interval: .never,
                lastBudgetAt: nil
            )
            let second = FetchStateRecord(
                token: token(2),
                results: 0,
                resultCount: 0,
                penaltyUntil: nil,
                interval: .seconds(900),
                lastBudgetAt: 77
            )
            let third = FetchStateRecord(
                token: token(3),
                results: .max,
                resultCount: 16,
                penaltyUntil: nil,
                interval: .minimum,
                lastBudgetAt: nil
            )
            try await store.commit([
                .createDevice(DeviceRecord(id: "d", secretHash: [1], createdAt: 1)),
                .createDevice(DeviceRecord(id: "e", secretHash: [2], createdAt: 1)),
                .register(registration(1, device: "d", topic: "a")),
                .register(registration(2, device: "d", topic: "b")),
                .register(registration(3, device: "e", topic: "a")),
                .saveFetchStates([first, second, third]),
                .openFetchWindows([
                    FetchWindowRecord(deviceID: "d", seq: 4, token: token(1), openedAt: 40),
                    FetchWindowRecord(deviceID: "d", seq: 2, token: token(2), openedAt: 20),
                    FetchWindowRecord(deviceID: "e", seq: 9, token: token(3), openedAt: 90),
                    FetchWindowRecord(deviceID: "e", seq: 10, token: token(3), openedAt: 100),
                ]),
            ])
            var replaced = first
            replaced.resultCount = 3
            try await store.commit([.saveFetchStates([replaced]), .closeFetchWindows(deviceID: "e", seqs: [10, 11])])
            var snapshot = try store.load()
            #expect(snapshot.fetchStates == [replaced, second, third])
            #expect(
                snapshot.fetchWindows.map { "\($0.deviceID):\($0.seq):\($0.closed)" } == [
                    "d:2:false", "d:4:false", "e:9:false", "e:10:true",
                ]
            )
            #expect(
                snapshot.fetchWindows.first == FetchWindowRecord(deviceID: "d", seq: 2, token: token(2), openedAt: 20)
            )
            try await store.commit([.forgetFetchWindows(deviceID: "e", seqs: [10, 12])])
            snapshot = try store.load()
            #expect(snapshot.fetchWindows.map { "\($0.deviceID):\($0.seq)" } == ["d:2", "d:4", "e:9"])

            try await store.commit([.unregister(token: token(2), at: 30)])
            snapshot = try store.load()
            #expect(snapshot.fetchStates.map(\.token) == [token(1), token(3)])
            #expect(snapshot.fetchWindows.map(\.seq) == [4, 9])
            try await store.commit([.deleteDevice(id: "d", at: 40, acceptanceIDs: [])])
            snapshot = try store.load()
            #expect(snapshot.fetchStates.map(\.token) == [token(3)])
            #expect(snapshot.fetchWindows.map(\.seq) == [9])
        }
    }

    @Test("addTotals adds to each named total, which starts at 0, through load()", arguments: StoreBackendKind.allCases)
    func durableTotals(_ backend: StoreBackendKind) async throws {
        try await withStore(backend) { store in
            try await store.commit([.addTotals(["received": 3, "delivered": 2])])
            try await store.commit([.addTotals(["received": 4]), .addTotals(["dropped": 1, "delivered": 0])])
            #expect(try store.load().totals == ["received": 7, "delivered": 2, "dropped": 1])
        }
    }

    @Test("a total that would overflow fails its batch and keeps its value", arguments: StoreBackendKind.allCases)
    func durableTotalOverflow(_ backend: StoreBackendKind) async throws {
        try await withStore(backend) { store in
            try await store.commit([.addTotals(["received": Int64.max - 1])])
            await #expect(throws: StoreError.self) {
                try await store.commit([.addTotals(["received": 2])])
            }
            #expect(try store.load().totals == ["received": Int64.max - 1])
        }
    }

    @Test(
        "register leaves the app state unset, whatever the record says; setAppState sets it",
        arguments: StoreBackendKind.allCases
    )
    func registerAppState(_ backend: StoreBackendKind) async throws {
        try await withStore(backend) { store in
            var reported = registration(1, device: "d", topic: "t")
            reported.appState = .terminated
            try await store.commit([.createDevice(device("d")), .register(reported)])
            #expect(try store.load().registrations.map(\.appState) == [nil])
            try await store.commit([
                .setAppState(token: token(1), state: .background), .setAppState(token: token(99), state: .foreground),
            ])
            #expect(try store.load().registrations.map(\.appState) == [.background])
        }
    }

    @Test(
        "deleteDevice deletes the device and its notifications and marks its registrations unregistered at `at`",
        arguments: StoreBackendKind.allCases
    )
    func deleteDevice(_ backend: StoreBackendKind) async throws {
        try await withStore(backend) { store in
            try await store.commit([
                .createDevice(device("d")), .createDevice(device("keep")),
                .register(registration(1, device: "d", topic: "a")),
                .register(registration(2, device: "d", topic: "b", unregisteredAt: 100)),  // already gone
                .register(registration(3, device: "keep", topic: "a")),
                .enqueue(notification(1, device: "d", seq: 1)),
                .enqueue(notification(2, device: "keep", tokenNumber: 3, seq: 1)),
                .enqueue(notification(3, device: "d")),
            ])
            try await store.commit([.deleteDevice(id: "d", at: 9_000, acceptanceIDs: [1, 3])])
            let snapshot = try store.load()
            var kept = device("keep")
            kept.lastSeq = 1
            #expect(snapshot.devices == [kept])
            #expect(
                snapshot.registrations == [
                    registration(1, device: "d", topic: "a", unregisteredAt: 9_000),
                    registration(2, device: "d", topic: "b", unregisteredAt: 100),
                    registration(3, device: "keep", topic: "a"),
                ]
            )
            #expect(snapshot.notifications.map(\.acceptanceID) == [2])
            #expect(snapshot.maxAcceptanceID == 3)

            // The id can be used again by a new device; the old registrations stay unregistered.
            try await store.commit([
                .createDevice(device("d", createdAt: 5)), .register(registration(4, device: "d", topic: "a")),
            ])
            #expect(try store.load().registrations.map(\.unregisteredAt) == [9_000, 100, nil, nil])
        }
    }

    @Test("at most one active registration per (device, topic)", arguments: StoreBackendKind.allCases)
    func uniqueActiveRegistration(_ backend: StoreBackendKind) async throws {
        try await withStore(backend) { store in
            try await store.commit([
                .createDevice(device("d")), .createDevice(device("e")),
                .register(registration(1, device: "d", topic: "t")),
            ])
            await #expect {
                try await store.commit([.register(registration(2, device: "d", topic: "t"))])
            } throws: { error in
                guard let error = error as? StoreError else { return false }
                return error.kind == .database && error.message.contains(token(2))
            }
            // Another device, or another topic: fine.
            try await store.commit([
                .register(registration(3, device: "e", topic: "t")),
                .register(registration(4, device: "d", topic: "u")),
            ])
            // Once unregistered, the topic can be registered again, and again unregistered.
            try await store.commit([
                .unregister(token: token(1), at: 50), .register(registration(5, device: "d", topic: "t")),
            ])
            try await store.commit([
                .unregister(token: token(5), at: 60), .register(registration(6, device: "d", topic: "t")),
            ])
            let snapshot = try store.load()
            #expect(snapshot.registrations.map(\.token) == [token(1), token(3), token(4), token(5), token(6)])
            #expect(snapshot.registrations.map(\.unregisteredAt) == [50, nil, nil, 60, nil])
        }
    }

    @Test(
        "duplicate keys and values beyond 64 bits are refused, naming the command",
        arguments: StoreBackendKind.allCases
    )
    func constraintViolations(_ backend: StoreBackendKind) async throws {
        try await withStore(backend) { store in
            try await store.commit([.createDevice(device("d")), .enqueue(notification(1, device: "d"))])
            await #expect {
                try await store.commit([.createDevice(device("d"))])
            } throws: {
                ($0 as? StoreError)?.kind == .database
                    && ($0 as? StoreError)?.message.contains("createDevice d") == true
            }
            await #expect {
                try await store.commit([.enqueue(notification(1, device: "d"))])
            } throws: {
                ($0 as? StoreError)?.kind == .database
                    && ($0 as? StoreError)?.message.contains("enqueue acceptance id 1 ") == true
            }
            await #expect {
                try await store.commit([.enqueue(notification(UInt64(Int64.max) + 1, device: "d"))])
            } throws: {
                ($0 as? StoreError)?.kind == .database
                    && ($0 as? StoreError)?.message.contains("enqueue acceptance id \(UInt64(Int64.max) + 1)") == true
            }
            #expect(try store.load().notifications.map(\.acceptanceID) == [1])
            #expect(try store.load().maxAcceptanceID == 1)
            #expect(store.batchesFailed == 3)
            // Refused for their content, not for the storage: the store can still commit.
            #expect(store.health.canCommit)
            #expect(store.health.failedTransactions == 0)
        }
    }

    @Test(
        "a batch is atomic: a failing command undoes the batch's earlier commands",
        arguments: StoreBackendKind.allCases
    )
    func batchAtomicity(_ backend: StoreBackendKind) async throws {
        try await withStore(backend) { store in
            try await store.commit([.createDevice(device("d"))])
            await #expect(throws: StoreError.self) {
                try await store.commit([
                    .enqueue(notification(1, device: "d")),
                    .ack(deviceID: "d", acceptanceIDs: [1]),
                    .createDevice(device("d")),  // duplicate
                ])
            }
            let snapshot = try store.load()
            #expect(snapshot.notifications.isEmpty)
            #expect(snapshot.devices == [device("d")])
            #expect(snapshot.maxAcceptanceID == 0)
        }
    }
}
