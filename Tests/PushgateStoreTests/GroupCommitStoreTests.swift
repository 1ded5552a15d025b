import Synchronization
import Testing
@_spi(Testing) import PushgateStore
import PushgateStoreTestKit

/// The group-commit queue's answers to what no well-behaved database does on demand: a
/// transaction that fails as a whole, and the order of calls a backend sees.
@Suite("GroupCommitStore")
struct GroupCommitStoreTests {
    /// The in-memory backend, recording each call, with the transaction of any group holding
    /// `poison` failing as a whole.
    final class RecordingBackend: StoreBackend {
        static let poison = StoreCommand.remove(acceptanceIDs: [666])
        let inner = InMemoryBackend()
        let calls = Mutex<[String]>([])

        func load() -> StoreSnapshot {
            calls.withLock { $0.append("load") }
            return inner.load()
        }

        func apply(_ group: [[StoreCommand]]) throws(StoreError) -> [Result<Void, StoreError>] {
            calls.withLock { $0.append("apply \(group.count)") }
            if group.contains(where: { $0.contains(Self.poison) }) {
                throw StoreError(.database, "injected: the transaction was rolled back")
            }
            return inner.apply(group)
        }

        func close() {
            calls.withLock { $0.append("close") }
        }
    }

    @Test("a failing transaction fails every batch of its group, counted; the next group commits")
    func failingTransaction() async throws {
        let backend = RecordingBackend()
        let store = GroupCommitStore(backend: backend, logger: quietLogger)
        try await store.commit([.createDevice(device("d"))])

        store.pauseWriter()
        let outcomes = Outcomes()
        outcomes.submit(store, 0, [.enqueue(notification(1, device: "d"))])
        outcomes.submit(store, 1, [RecordingBackend.poison])
        outcomes.submit(store, 2, [.enqueue(notification(2, device: "d")), .enqueue(notification(3, device: "d"))])
        store.resumeWriter()
        let results = await outcomes.collectInOrder(3)

        #expect(results.map(\.0) == [0, 1, 2])
        for (_, result) in results {
            guard case .failure(let error) = result else {
                Issue.record("a batch of the failed transaction committed")
                continue
            }
            #expect(error == StoreError(.database, "injected: the transaction was rolled back"))
        }
        #expect(store.transactionsCommitted == 1)
        #expect(store.batchesCommitted == 1)
        #expect(store.commandsCommitted == 1)
        #expect(store.batchesFailed == 3)

        try await store.commit([.enqueue(notification(4, device: "d"))])
        #expect(try store.load().notifications.map(\.acceptanceID) == [4])
        #expect(store.transactionsCommitted == 2)
        await store.close()
    }

    @Test("the backend is called from the writer in order: load between groups, close once after the last")
    func backendCalls() async throws {
        let backend = RecordingBackend()
        let store = GroupCommitStore(backend: backend, logger: quietLogger)
        _ = try store.load()
        store.pauseWriter()
        let outcomes = Outcomes()
        for i in 1...3 {
            outcomes.submit(store, i, [.createDevice(device("d\(i)"))])
        }
        // Two closers at once: both wait for the pending batches, the backend closes once.
        async let first: Void = store.close()
        async let second: Void = store.close()
        _ = await (first, second)
        await store.close()

        #expect(await outcomes.collect(3).values.allSatisfy { $0.isSuccess })
        #expect(backend.calls.withLock { $0 } == ["load", "apply 3", "close"])
        #expect(throws: StoreError(.closed, "the store is closed")) {
            _ = try store.load()
        }
    }
}
