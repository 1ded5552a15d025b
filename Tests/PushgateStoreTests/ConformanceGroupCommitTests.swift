import Foundation
@_spi(Testing) import PushgateStore
import PushgateStoreTestKit
import Testing

/// What every store does with batches, whichever backend it runs on (see `StoreBackendKind`):
/// durability across a restart, group commit, atomic batches within a group, submission order,
/// the overload limit, closing.
@Suite("Store conformance: batches and group commit")
struct ConformanceGroupCommitTests {
    @Test("close and reopen keeps everything", arguments: StoreBackendKind.allCases)
    func restart(_ backend: StoreBackendKind) async throws {
        try await withFixture(backend) { fixture in
            var store = try fixture.open()
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

            store = try fixture.open()
            let after = try store.load()
            #expect(after == before)
            #expect(after.notifications.map(\.acceptanceID) == [11, 12])
            #expect(after.maxAcceptanceID == 12)
            // And it keeps working.
            try await store.commit([.enqueue(notification(13, device: "d", seq: 3))])
            await store.close()

            store = try fixture.open()
            #expect(try store.load().notifications.map(\.acceptanceID) == [11, 12, 13])
            await store.close()
        }
    }

    @Test("maxAcceptanceID survives deleting every notification, and a restart", arguments: StoreBackendKind.allCases)
    func maxAcceptanceIDSurvives(_ backend: StoreBackendKind) async throws {
        try await withFixture(backend) { fixture in
            var store = try fixture.open()
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

            store = try fixture.open()
            snapshot = try store.load()
            #expect(snapshot.notifications.isEmpty)
            #expect(snapshot.maxAcceptanceID == 42)
            await store.close()
        }
    }

    @Test("maxAcceptanceID counts an id stored and deleted within one group", arguments: StoreBackendKind.allCases)
    func maxAcceptanceIDWithinOneGroup(_ backend: StoreBackendKind) async throws {
        try await withFixture(backend) { fixture in
            var store = try fixture.open()
            try await store.commit([.createDevice(device("d")), .enqueue(notification(7, device: "d", seq: 1))])
            store.pauseWriter()
            let outcomes = Outcomes()
            outcomes.submit(store, 1, [.enqueue(notification(8, device: "d", seq: 2))])
            outcomes.submit(store, 2, [.enqueue(notification(9, device: "d", seq: 3))])
            // Refused (the device exists), so undone whole: its id must not count.
            outcomes.submit(store, 3, [.enqueue(notification(20, device: "d")), .createDevice(device("d"))])
            outcomes.submit(store, 4, [.ack(deviceID: "d", acceptanceIDs: [7, 8, 9])])
            store.resumeWriter()
            let results = await outcomes.collect(4)
            #expect(results[1]?.isSuccess == true && results[2]?.isSuccess == true && results[4]?.isSuccess == true)
            #expect(results[3]?.isSuccess == false)
            #expect(try store.load().maxAcceptanceID == 9)
            await store.close()

            store = try fixture.open()
            let snapshot = try store.load()
            #expect(snapshot.notifications.isEmpty)
            #expect(snapshot.maxAcceptanceID == 9)
            await store.close()
        }
    }

    @Test("batches submitted while the writer is busy share one transaction", arguments: StoreBackendKind.allCases)
    func groupCommitGroups(_ backend: StoreBackendKind) async throws {
        try await withStore(backend) { store in
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

    @Test(
        "a failing batch in a group fails alone; the others commit in the same transaction",
        arguments: StoreBackendKind.allCases
    )
    func failingBatchInGroup(_ backend: StoreBackendKind) async throws {
        try await withStore(backend) { store in
            try await store.commit([.createDevice(device("d")), .enqueue(notification(1, device: "d", seq: 1))])
            let transactionsBefore = store.transactionsCommitted

            store.pauseWriter()
            let outcomes = Outcomes()
            // 0: fine.
            outcomes.submit(store, 0, [.enqueue(notification(2, device: "d", seq: 2))])
            // 1: several commands, the last fails (duplicate device): all undone, including
            // the ack that would have deleted notifications 1 and 2.
            outcomes.submit(
                store,
                1,
                [
                    .enqueue(notification(3, device: "d")),
                    .ack(deviceID: "d", acceptanceIDs: [1, 2]),
                    .register(registration(9, device: "d", topic: "t")),
                    .createDevice(device("d")),
                ]
            )
            // 2: a single failing command (an acceptance id beyond 64 bits).
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
                #expect(error.message.contains("createDevice d"))
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

    @Test(
        "batches commit and complete in submission order, in groups of about maxGroupCommands commands",
        arguments: StoreBackendKind.allCases
    )
    func submissionOrder(_ backend: StoreBackendKind) async throws {
        try await withStore(backend, maxGroupCommands: 4) { store in
            try await store.commit([.createDevice(device("d"))])
            let transactionsBefore = store.transactionsCommitted

            store.pauseWriter()
            let outcomes = Outcomes()
            for i in 1...10 {
                outcomes.submit(store, i, [.enqueue(notification(UInt64(i), device: "d"))])
            }
            // A batch larger than a group goes in whole, in its turn; the next one, which undoes
            // part of it, in a later group.
            outcomes.submit(store, 11, (11...16).map { .enqueue(notification(UInt64($0), device: "d")) })
            outcomes.submit(store, 12, [.remove(acceptanceIDs: [16])])
            store.resumeWriter()
            let completed = await outcomes.collectInOrder(12)

            #expect(completed.map(\.0) == Array(1...12))
            #expect(completed.allSatisfy { $0.1.isSuccess })
            // 1-4, 5-8, 9-11 (the group is full once batch 11 is in), 12.
            #expect(store.transactionsCommitted == transactionsBefore + 4)
            #expect(store.pendingCommands == 0)
            #expect(try store.load().notifications.map(\.acceptanceID) == (1...15).map { UInt64($0) })
        }
    }

    @Test(
        "over maxPendingCommands, batches are refused with .overloaded and counted",
        arguments: StoreBackendKind.allCases
    )
    func overloaded(_ backend: StoreBackendKind) async throws {
        try await withStore(backend, maxPendingCommands: 3) { store in
            try await store.commit([.createDevice(device("d"))])
            store.pauseWriter()
            let outcomes = Outcomes()
            // 2 pending
            outcomes.submit(store, 0, [.enqueue(notification(1, device: "d")), .enqueue(notification(2, device: "d"))])
            // 4 > 3: refused
            outcomes.submit(store, 1, [.enqueue(notification(3, device: "d")), .enqueue(notification(4, device: "d"))])
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
            try await store.commit([
                .enqueue(notification(7, device: "d")), .enqueue(notification(8, device: "d")),
                .remove(acceptanceIDs: [1]),
            ])
            await #expect {
                try await store.commit((10...13).map { .enqueue(notification($0, device: "d")) })
            } throws: { ($0 as? StoreError)?.kind == .overloaded }
            #expect(store.batchesRejectedOverloaded == 3)
        }
    }

    @Test("close() commits everything pending, then refuses commits with .closed", arguments: StoreBackendKind.allCases)
    func closeDrains(_ backend: StoreBackendKind) async throws {
        try await withFixture(backend) { fixture in
            var store = try fixture.open()
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

            store = try fixture.open()
            #expect(try store.load().notifications.map(\.acceptanceID) == [1, 2, 3, 4, 5])
            await store.close()
        }
    }

    @Test(
        "many threads committing concurrently: every batch completes once, all data is there",
        arguments: StoreBackendKind.allCases
    )
    func concurrentCommits(_ backend: StoreBackendKind) async throws {
        try await withStore(backend) { store in
            try await store.commit((0..<4).map { .createDevice(device("d\($0)")) })
            let threads = 4
            let perThread = 500
            let outcomes = Outcomes()
            DispatchQueue.concurrentPerform(iterations: threads) { t in
                for i in 0..<perThread {
                    let id = t * perThread + i + 1
                    outcomes.submit(
                        store,
                        id,
                        [.enqueue(notification(UInt64(id), device: "d\(t)", seq: UInt64(i + 1)))]
                    )
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
