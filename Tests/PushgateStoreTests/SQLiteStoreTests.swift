import Foundation
import Testing
@_spi(Testing) import PushgateStore
@_spi(Testing) import PushgateStoreSQLite

@Suite("SQLiteStore")
struct SQLiteStoreTests {
    // MARK: - Opening

    @Test("a new store is empty, in WAL mode, fsyncs every commit and enforces foreign keys")
    func openingSettings() async throws {
        try await withStore { store, directory throws in
            #expect(store.path == directory + "/pushgate.sqlite")
            #expect(FileManager.default.fileExists(atPath: store.path))
            #expect(try store.pragma("journal_mode") == "wal")
            #expect(try store.pragma("synchronous") == "2")  // FULL
            #expect(try store.pragma("foreign_keys") == "1")
            #expect(try store.load() == StoreSnapshot(devices: [], registrations: [], notifications: [], maxAcceptanceID: 0))
        }
    }

    @Test("creates missing parent directories")
    func createsDirectories() async throws {
        let root = try TempDirectory()
        defer { root.remove() }
        let nested = root.path + "/a/b/c/"
        let store = try openStore(nested)
        #expect(store.path == nested + "pushgate.sqlite")
        #expect(FileManager.default.fileExists(atPath: root.path + "/a/b/c/pushgate.sqlite"))
        await store.close()
    }

    @Test("a directory that cannot be created gives an error naming the path")
    func unusableDirectory() throws {
        let root = try TempDirectory()
        defer { root.remove() }
        let file = root.path + "/not-a-directory"
        try Data("x".utf8).write(to: URL(fileURLWithPath: file))
        #expect {
            _ = try openStore(file + "/data")
        } throws: { error in
            guard let error = error as? StoreError else { return false }
            return error.kind == .database && error.message.contains(file + "/data")
                && error.message.contains(file + " exists and is not a directory")
        }
        #expect {
            _ = try openStore(file)
        } throws: { error in
            guard let error = error as? StoreError else { return false }
            return error.kind == .database && error.message.contains(file + " exists and is not a directory")
        }
    }

    @Test("a file that is not a database gives an error with SQLite's message and the path")
    func notADatabase() throws {
        let root = try TempDirectory()
        defer { root.remove() }
        try Data(repeating: 0x42, count: 8192).write(to: URL(fileURLWithPath: root.path + "/pushgate.sqlite"))
        #expect {
            _ = try openStore(root.path)
        } throws: { error in
            guard let error = error as? StoreError else { return false }
            return error.kind == .database
                && error.message.contains(root.path + "/pushgate.sqlite")
                && error.message.contains("not a database")
        }
    }

    @Test("a second store on the same directory is refused while the first is open")
    func exclusiveOwnership() async throws {
        let directory = try TempDirectory()
        defer { directory.remove() }
        let first = try openStore(directory.path)
        #expect(try first.pragma("locking_mode") == "exclusive")
        #expect {
            _ = try openStore(directory.path)
        } throws: { error in
            guard let error = error as? StoreError else { return false }
            return error.kind == .database && error.message.contains("database is locked")
                && error.message.contains(directory.path + "/pushgate.sqlite")
        }
        try await first.commit([.createDevice(device("d"))])  // the first one is unaffected
        await first.close()
        let second = try openStore(directory.path)
        #expect(try second.load().devices == [device("d")])
        await second.close()
    }

    // MARK: - Commands

    @Test("createDevice, register, enqueue round-trip through load()")
    func roundTrip() async throws {
        try await withStore { store, _ in
            let d1 = device("dev-1", createdAt: 111)
            let d2 = device("dev-2", createdAt: 222, lastSeq: 7)
            let r1 = registration(1, device: "dev-1", topic: "com.example.news", createdAt: 333)
            let r2 = registration(2, device: "dev-2", topic: "com.example.chat", createdAt: 444)
            let n1 = notification(5, device: "dev-1", collapseID: "c1", payloadSize: 300, seq: nil)
            let n2 = notification(3, device: "dev-2", tokenNumber: 2, topic: "com.example.chat", payloadSize: 4096, seq: 5)
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

    @Test("an empty batch succeeds")
    func emptyBatch() async throws {
        try await withStore { store, _ in
            try await store.commit([])
            #expect(try store.load().devices.isEmpty)
        }
    }

    @Test("unregister sets unregisteredAt once; unknown tokens are a no-op")
    func unregister() async throws {
        try await withStore { store, _ in
            try await store.commit([.createDevice(device("d")), .register(registration(1, device: "d", topic: "t"))])
            try await store.commit([.unregister(token: token(1), at: 5_000)])
            #expect(try store.load().registrations == [registration(1, device: "d", topic: "t", unregisteredAt: 5_000)])
            try await store.commit([.unregister(token: token(1), at: 6_000), .unregister(token: token(99), at: 6_000)])
            #expect(try store.load().registrations == [registration(1, device: "d", topic: "t", unregisteredAt: 5_000)])
        }
    }

    @Test("assignSeq gives a held notification its sequence number")
    func assignSeq() async throws {
        try await withStore { store, _ in
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

    @Test("remove deletes by acceptance id and ignores unknown ids")
    func remove() async throws {
        try await withStore { store, _ in
            try await store.commit([.createDevice(device("d"))] + (1...5).map { .enqueue(notification($0, device: "d")) })
            try await store.commit([.remove(acceptanceIDs: [2, 4, 40])])
            try await store.commit([.remove(acceptanceIDs: [5])])
            try await store.commit([.remove(acceptanceIDs: [])])
            #expect(try store.load().notifications.map(\.acceptanceID) == [1, 3])
        }
    }

    @Test("ack deletes exactly the notifications it names; it writes no device row")
    func ack() async throws {
        try await withStore { store, _ in
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

    @Test("lastSeq covers every seq ever assigned: reserved, stored, or removed unacked; never lowered")
    func lastSeq() async throws {
        try await withStore { store, _ in
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

    @Test("bucket levels and app states survive a reload; unregister and deleteDevice remove their buckets")
    func schedulerState() async throws {
        try await withStore { store, _ in
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
                    BucketRecord(key: a2, level: 2, at: 10), BucketRecord(key: BucketRecord.appKey(token(3)), level: 3, at: 10),
                ]),
                .setAppState(token: token(1), state: "terminated"),
            ])
            try await store.commit([.saveBuckets([BucketRecord(key: d, level: 7, at: 20)])])  // replaces
            var snapshot = try store.load()
            #expect(snapshot.buckets.first { $0.key == d } == BucketRecord(key: d, level: 7, at: 20))
            #expect(snapshot.buckets.count == 4)
            #expect(snapshot.registrations.first { $0.token == token(1) }?.appState == "terminated")
            #expect(snapshot.registrations.first { $0.token == token(2) }?.appState == nil)

            try await store.commit([.unregister(token: token(2), at: 30)])
            snapshot = try store.load()
            #expect(!snapshot.buckets.contains { $0.key == a2 })
            try await store.commit([.deleteDevice(id: "d", at: 40, acceptanceIDs: [])])
            snapshot = try store.load()
            #expect(snapshot.buckets.map(\.key) == [BucketRecord.appKey(token(3))])
        }
    }

    @Test("deleteDevice deletes the device and its notifications and marks its registrations unregistered at `at`")
    func deleteDevice() async throws {
        try await withStore { store, _ in
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
            #expect(snapshot.registrations == [
                registration(1, device: "d", topic: "a", unregisteredAt: 9_000),
                registration(2, device: "d", topic: "b", unregisteredAt: 100),
                registration(3, device: "keep", topic: "a"),
            ])
            #expect(snapshot.notifications.map(\.acceptanceID) == [2])
            #expect(snapshot.maxAcceptanceID == 3)

            // The id can be used again by a new device; the old registrations stay unregistered.
            try await store.commit([.createDevice(device("d", createdAt: 5)), .register(registration(4, device: "d", topic: "a"))])
            #expect(try store.load().registrations.map(\.unregisteredAt) == [9_000, 100, nil, nil])
        }
    }

    @Test("at most one active registration per (device, topic)")
    func uniqueActiveRegistration() async throws {
        try await withStore { store, _ in
            try await store.commit([.createDevice(device("d")), .createDevice(device("e")), .register(registration(1, device: "d", topic: "t"))])
            await #expect {
                try await store.commit([.register(registration(2, device: "d", topic: "t"))])
            } throws: { error in
                guard let error = error as? StoreError else { return false }
                return error.kind == .database && error.message.contains("UNIQUE constraint failed")
                    && error.message.contains(token(2))
            }
            // Another device, or another topic: fine.
            try await store.commit([.register(registration(3, device: "e", topic: "t")), .register(registration(4, device: "d", topic: "u"))])
            // Once unregistered, the topic can be registered again, and again unregistered.
            try await store.commit([.unregister(token: token(1), at: 50), .register(registration(5, device: "d", topic: "t"))])
            try await store.commit([.unregister(token: token(5), at: 60), .register(registration(6, device: "d", topic: "t"))])
            let snapshot = try store.load()
            #expect(snapshot.registrations.map(\.token) == [token(1), token(3), token(4), token(5), token(6)])
            #expect(snapshot.registrations.map(\.unregisteredAt) == [50, nil, nil, 60, nil])
        }
    }

    @Test("duplicate keys and values SQLite cannot store are refused with a message")
    func constraintViolations() async throws {
        try await withStore { store, _ in
            try await store.commit([.createDevice(device("d")), .enqueue(notification(1, device: "d"))])
            await #expect {
                try await store.commit([.createDevice(device("d"))])
            } throws: { ($0 as? StoreError)?.message.contains("UNIQUE constraint failed: devices.id") == true }
            await #expect {
                try await store.commit([.enqueue(notification(1, device: "d"))])
            } throws: { ($0 as? StoreError)?.message.contains("UNIQUE constraint failed: notifications.acceptance_id") == true }
            await #expect {
                try await store.commit([.enqueue(notification(UInt64(Int64.max) + 1, device: "d"))])
            } throws: { ($0 as? StoreError)?.message.contains("exceeds the largest storable value") == true }
            #expect(try store.load().notifications.map(\.acceptanceID) == [1])
            #expect(try store.load().maxAcceptanceID == 1)
            #expect(store.batchesFailed == 3)
        }
    }

    @Test("a batch is atomic: a failing command undoes the batch's earlier commands")
    func batchAtomicity() async throws {
        try await withStore { store, _ in
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

    // MARK: - Durability across restarts

    @Test("close and reopen keeps everything")
    func restart() async throws {
        let directory = try TempDirectory()
        defer { directory.remove() }
        var store = try openStore(directory.path)
        try await store.commit([
            .createDevice(device("d")),
            .register(registration(1, device: "d", topic: "t")),
            .register(registration(2, device: "d", topic: "u", unregisteredAt: 77)),
            .enqueue(notification(10, device: "d", seq: 1)),
            .enqueue(notification(11, device: "d", collapseID: "x")),
            .enqueue(notification(12, device: "d", seq: 2)),
        ])
        try await store.commit([.ack(deviceID: "d", acceptanceIDs: [10])])
        let before = try store.load()
        await store.close()

        store = try openStore(directory.path)
        let after = try store.load()
        #expect(after == before)
        #expect(after.notifications.map(\.acceptanceID) == [11, 12])
        #expect(after.maxAcceptanceID == 12)
        #expect(try store.pragma("synchronous") == "2")
        // And it keeps working.
        try await store.commit([.enqueue(notification(13, device: "d", seq: 3))])
        await store.close()

        store = try openStore(directory.path)
        #expect(try store.load().notifications.map(\.acceptanceID) == [11, 12, 13])
        await store.close()
    }

    @Test("maxAcceptanceID survives deleting every notification, and a restart")
    func maxAcceptanceIDSurvives() async throws {
        let directory = try TempDirectory()
        defer { directory.remove() }
        var store = try openStore(directory.path)
        try await store.commit([
            .createDevice(device("d")),
            .enqueue(notification(41, device: "d", seq: 1)),
            .enqueue(notification(42, device: "d")),
        ])
        try await store.commit([.enqueue(notification(40, device: "d"))])  // lower id: max stays
        try await store.commit([.ack(deviceID: "d", acceptanceIDs: [41]), .remove(acceptanceIDs: [40, 42])])
        var snapshot = try store.load()
        #expect(snapshot.notifications.isEmpty)
        #expect(snapshot.maxAcceptanceID == 42)

        try await store.commit([.deleteDevice(id: "d", at: 1, acceptanceIDs: [])])
        #expect(try store.load().maxAcceptanceID == 42)
        await store.close()

        store = try openStore(directory.path)
        snapshot = try store.load()
        #expect(snapshot.notifications.isEmpty)
        #expect(snapshot.maxAcceptanceID == 42)
        await store.close()
    }

    // MARK: - Group commit

    @Test("batches submitted while the writer is busy share one transaction")
    func groupCommitGroups() async throws {
        try await withStore { store, _ in
            try await store.commit([.createDevice(device("d"))])
            let transactionsBefore = store.transactionsCommitted
            #expect(transactionsBefore == 1)
            #expect(store.commandsCommitted == 1)

            store.pauseWriter()
            let outcomes = Outcomes()
            for i in 1...50 {
                outcomes.submit(store, i, [.enqueue(notification(UInt64(i), device: "d"))])
            }
            #expect(store.pendingCommands == 50)
            #expect(store.transactionsCommitted == transactionsBefore)
            store.resumeWriter()
            let results = await outcomes.collect(50)
            #expect(results.count == 50)
            #expect(results.values.allSatisfy { $0.isSuccess })

            #expect(store.transactionsCommitted == transactionsBefore + 1)
            #expect(store.commandsCommitted == 51)
            #expect(store.batchesCommitted == 51)
            #expect(store.batchesFailed == 0)
            #expect(store.pendingCommands == 0)
            #expect(store.lastTransactionNanoseconds > 0)
            #expect(store.maxTransactionNanoseconds >= store.lastTransactionNanoseconds)
            #expect(store.totalTransactionNanoseconds >= store.maxTransactionNanoseconds)
            #expect(try store.load().notifications.map(\.acceptanceID) == (1...50).map { UInt64($0) })
        }
    }

    @Test("a failing batch in a group fails alone; the others commit in the same transaction")
    func failingBatchInGroup() async throws {
        try await withStore { store, _ in
            try await store.commit([.createDevice(device("d")), .enqueue(notification(1, device: "d", seq: 1))])
            let transactionsBefore = store.transactionsCommitted

            store.pauseWriter()
            let outcomes = Outcomes()
            // 0: fine.
            outcomes.submit(store, 0, [.enqueue(notification(2, device: "d", seq: 2))])
            // 1: several commands, the last fails (duplicate device): all undone, including
            // the ack that would have deleted notifications 1 and 2.
            outcomes.submit(store, 1, [
                .enqueue(notification(3, device: "d")),
                .ack(deviceID: "d", acceptanceIDs: [1, 2]),
                .register(registration(9, device: "d", topic: "t")),
                .createDevice(device("d")),
            ])
            // 2: a single failing command (an acceptance id SQLite cannot store).
            outcomes.submit(store, 2, [.enqueue(notification(UInt64(Int64.max) + 1, device: "d"))])
            // 3: fine, and depends on batch 0 of the same group.
            outcomes.submit(store, 3, [.assignSeq(acceptanceID: 2, seq: 5), .enqueue(notification(5, device: "d"))])
            // 4: a single command that would have conflicted with batch 1 had it survived.
            outcomes.submit(store, 4, [.enqueue(notification(3, device: "d", seq: 6))])
            store.resumeWriter()
            let results = await outcomes.collect(5)

            #expect(results[0]?.isSuccess == true)
            #expect(results[1]?.errorKind == .database)
            #expect(results[2]?.errorKind == .database)
            #expect(results[3]?.isSuccess == true)
            #expect(results[4]?.isSuccess == true)
            if case .failure(let error) = results[1] {
                #expect(error.message.contains("UNIQUE constraint failed: devices.id"))
                #expect(error.message.contains("createDevice d"))
            }
            if case .failure(let error) = results[2] {
                #expect(error.message.contains("exceeds the largest storable value"))
            }
            #expect(store.transactionsCommitted == transactionsBefore + 1)
            #expect(store.batchesFailed == 2)
            #expect(store.commandsCommitted == 2 + 1 + 2 + 1)

            let snapshot = try store.load()
            #expect(snapshot.notifications.map(\.acceptanceID) == [1, 2, 3, 5])
            #expect(snapshot.notifications.map(\.seq) == [1, 5, 6, nil])
            #expect(snapshot.devices.map(\.lastSeq) == [6])
            #expect(snapshot.registrations.isEmpty)
            #expect(snapshot.maxAcceptanceID == 5)
        }
    }

    @Test("over maxPendingCommands, batches are refused with .overloaded and counted")
    func overloaded() async throws {
        try await withStore(maxPendingCommands: 3) { store, _ in
            try await store.commit([.createDevice(device("d"))])
            store.pauseWriter()
            let outcomes = Outcomes()
            outcomes.submit(store, 0, [.enqueue(notification(1, device: "d")), .enqueue(notification(2, device: "d"))])  // 2 pending
            outcomes.submit(store, 1, [.enqueue(notification(3, device: "d")), .enqueue(notification(4, device: "d"))])  // 4 > 3: refused
            outcomes.submit(store, 2, [.enqueue(notification(5, device: "d"))])  // 3: accepted
            outcomes.submit(store, 3, [.enqueue(notification(6, device: "d"))])  // 4 > 3: refused
            outcomes.submit(store, 4, [])  // nothing more: accepted
            // Refusals complete at once, with the writer still paused.
            let early = await outcomes.collect(2)
            #expect(early[1]?.errorKind == .overloaded)
            #expect(early[3]?.errorKind == .overloaded)
            #expect(store.batchesRejectedOverloaded == 2)
            #expect(store.pendingCommands == 3)

            store.resumeWriter()
            let late = await outcomes.collect(3)
            #expect(late[0]?.isSuccess == true)
            #expect(late[2]?.isSuccess == true)
            #expect(late[4]?.isSuccess == true)
            #expect(try store.load().notifications.map(\.acceptanceID) == [1, 2, 5])

            // Room again once the writer has taken the queue; a batch larger than the limit never fits.
            try await store.commit([.enqueue(notification(7, device: "d")), .enqueue(notification(8, device: "d")), .remove(acceptanceIDs: [1])])
            await #expect {
                try await store.commit((10...13).map { .enqueue(notification($0, device: "d")) })
            } throws: { ($0 as? StoreError)?.kind == .overloaded }
            #expect(store.batchesRejectedOverloaded == 3)
        }
    }

    @Test("close() commits everything pending, then refuses commits with .closed")
    func closeDrains() async throws {
        let directory = try TempDirectory()
        defer { directory.remove() }
        var store = try openStore(directory.path)
        try await store.commit([.createDevice(device("d"))])
        store.pauseWriter()
        let outcomes = Outcomes()
        for i in 1...5 {
            outcomes.submit(store, i, [.enqueue(notification(UInt64(i), device: "d"))])
        }
        await store.close()  // resumes the paused writer, drains, closes
        let results = await outcomes.collect(5)
        #expect(results.count == 5)
        #expect(results.values.allSatisfy { $0.isSuccess })
        #expect(store.transactionsCommitted == 2)

        outcomes.submit(store, 6, [.enqueue(notification(6, device: "d"))])
        let refused = await outcomes.collect(1)
        #expect(refused[6]?.errorKind == .closed)
        await #expect {
            try await store.commit([])
        } throws: { ($0 as? StoreError)?.kind == .closed }
        #expect(throws: StoreError(.closed, "the store is closed")) {
            _ = try store.load()
        }
        await store.close()  // twice is fine

        store = try openStore(directory.path)
        #expect(try store.load().notifications.map(\.acceptanceID) == [1, 2, 3, 4, 5])
        await store.close()
    }

    @Test("many threads committing concurrently: every batch completes once, all data is there")
    func concurrentCommits() async throws {
        try await withStore { store, _ in
            try await store.commit((0..<4).map { .createDevice(device("d\($0)")) })
            let threads = 4
            let perThread = 500
            let outcomes = Outcomes()
            DispatchQueue.concurrentPerform(iterations: threads) { t in
                for i in 0..<perThread {
                    let id = t * perThread + i + 1
                    outcomes.submit(store, id, [.enqueue(notification(UInt64(id), device: "d\(t)", seq: UInt64(i + 1)))])
                }
            }
            let results = await outcomes.collect(threads * perThread)
            #expect(results.count == threads * perThread)
            #expect(results.values.allSatisfy { $0.isSuccess })
            #expect(store.commandsCommitted == UInt64(4 + threads * perThread))
            #expect(store.batchesCommitted == UInt64(1 + threads * perThread))
            #expect(store.transactionsCommitted >= 2)
            #expect(store.transactionsCommitted <= UInt64(1 + threads * perThread))
            let snapshot = try store.load()
            #expect(snapshot.notifications.count == threads * perThread)
            #expect(snapshot.notifications.map(\.acceptanceID) == (1...(threads * perThread)).map { UInt64($0) })
            #expect(snapshot.maxAcceptanceID == UInt64(threads * perThread))
        }
    }
}
