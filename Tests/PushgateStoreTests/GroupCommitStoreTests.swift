import Foundation
import InMemoryLogging
import Logging
import NIOConcurrencyHelpers
@_spi(Testing) import PushgateStore
import PushgateStoreTestKit
import Testing

#if canImport(Glibc)
import Glibc
import PushgateTestKit
#endif

/// The group-commit queue's answers to what no well-behaved database does on demand: a
/// transaction that fails as a whole, and the order of calls a backend sees.
@Suite("GroupCommitStore")
struct GroupCommitStoreTests {
    /// The in-memory backend, recording each call, with the transaction of any group holding
    /// `poison` failing as a whole.
    final class RecordingBackend: StoreBackend {
        static let poison = StoreCommand.remove(acceptanceIDs: [666])
        let inner = InMemoryBackend()
        let calls = NIOLockedValueBox<[String]>([])

        func load() -> StoreSnapshot {
            calls.withLockedValue { $0.append("load") }
            return inner.load()
        }

        func apply(_ group: [[StoreCommand]]) throws(StoreError) -> [Result<Void, StoreError>] {
            calls.withLockedValue { $0.append("apply \(group.count)") }
            if group.contains(where: { $0.contains(Self.poison) }) {
                throw StoreError(.database, "injected: the transaction was rolled back")
            }
            return inner.apply(group)
        }

        func close() {
            calls.withLockedValue { $0.append("close") }
        }
    }

    /// Reports each pause of the writer (`writerIdle`), after the groups it applied, and, given
    /// an interval, each probe with the thread it came on: its name and, on Linux, its policy.
    final class IdleReportingBackend: StoreBackend {
        let inner = InMemoryBackend()
        let events: AsyncStream<String>
        let probeInterval: Duration?
        private let continuation: AsyncStream<String>.Continuation

        init(probeInterval: Duration? = nil) {
            self.probeInterval = probeInterval
            (events, continuation) = AsyncStream.makeStream(of: String.self)
        }
        func load() -> StoreSnapshot { inner.load() }
        func apply(_ group: [[StoreCommand]]) throws(StoreError) -> [Result<Void, StoreError>] {
            continuation.yield("apply \(group.count)")
            return inner.apply(group)
        }
        func writerIdle() { continuation.yield("idle") }
        func probe() throws(StoreError) { continuation.yield("probe on \(Self.thread())") }
        func close() { continuation.finish() }

        static func thread() -> String {
            #if os(Linux)
            let name = (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? "?"
            // SCHED_BATCH is 3 in the kernel's ABI.
            return name.trimmingCharacters(in: .whitespacesAndNewlines) + (sched_getscheduler(0) == 3 ? " (batch)" : "")
            #else
            return "?"  // no batch policy to ask for elsewhere: the test fails there
            #endif
        }
    }

    @Test(
        "the backend hears when the writer has nothing left to apply (SQLite copies its WAL then)",
        .timeLimit(.minutes(1))
    )
    func writerIdleReported() async throws {
        let backend = IdleReportingBackend()
        let store = GroupCommitStore(backend: backend, logger: quietLogger)
        try await store.commit([.createDevice(device("d"))])
        var events = backend.events.makeAsyncIterator()
        #expect(await events.next() == "apply 1")
        #expect(await events.next() == "idle")
        try await store.commit([.enqueue(notification(1, device: "d"))])
        #expect(await events.next() == "apply 1")
        #expect(await events.next() == "idle")
        await store.close()
    }

    @Test(
        "the writer, a batch-scheduled thread of its own, applies groups and probes an idle backend at its interval",
        .timeLimit(.minutes(1))
    )
    func writerThreadProbes() async throws {
        let backend = IdleReportingBackend(probeInterval: .milliseconds(20))
        let store = GroupCommitStore(backend: backend, logger: quietLogger)
        var events = backend.events.makeAsyncIterator()
        let probe = "probe on pushgate-writer (batch)"
        // Idle from the start: probed with no commit.
        #expect(await events.next() == probe)
        try await store.commit([.createDevice(device("d"))])
        var next = await events.next()
        while next == probe { next = await events.next() }
        #expect(next == "apply 1")
        #expect(await events.next() == "idle")
        // Idle again: probed again, once the commit is an interval old.
        #expect(await events.next() == probe)
        await store.close()
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
        #expect(backend.calls.withLockedValue { $0 } == ["load", "apply 3", "close"])
        #expect(throws: StoreError(.closed, "the store is closed")) {
            _ = try store.load()
        }
    }
}

/// Pacing and durability modes, through the real writer.
@Suite("GroupCommitStore pacing")
struct GroupCommitPacingTests {
    /// Fails its first transaction, then tells the test; later ones go to memory.
    final class FailOnceBackend: StoreBackend {
        let inner = InMemoryBackend()
        private let failed = NIOLockedValueBox(false)
        let firstFailure: AsyncStream<Void>
        private let signal: AsyncStream<Void>.Continuation

        init() {
            (firstFailure, signal) = AsyncStream.makeStream()
        }

        func load() -> StoreSnapshot { inner.load() }

        func apply(_ group: [[StoreCommand]]) throws(StoreError) -> [Result<Void, StoreError>] {
            let first = failed.withLockedValue { failed in
                defer { failed = true }
                return !failed
            }
            if first {
                signal.yield()
                throw StoreError(.database, "injected: disk full")
            }
            return inner.apply(group)
        }

        func close() {}
    }

    @Test("a deferrable batch (an ack) waits for the next prompt commit and shares its transaction")
    func deferrableRidesAlong() async throws {
        let store = GroupCommitStore(
            backend: InMemoryBackend(),
            pacing: CommitPacing(lingerNanos: 0, deferNanos: 3_600_000_000_000),
            logger: quietLogger
        )
        try await store.commit([.createDevice(device("d"))])
        let before = store.transactionsCommitted

        let outcomes = Outcomes()
        outcomes.submit(store, 0, [.enqueue(notification(1, device: "d"))], urgency: .deferrable)
        #expect(store.pendingCommands == 1)  // an hour's deferral: nothing commits it on its own
        outcomes.submit(store, 1, [.enqueue(notification(2, device: "d"))])
        let results = await outcomes.collectInOrder(2)

        #expect(results.map(\.0) == [0, 1])
        #expect(results.allSatisfy { $0.1.isSuccess })
        #expect(store.transactionsCommitted == before + 1)
        await store.close()
    }

    @Test("a deferrable batch alone gets its own commit once its deferral ends")
    func deferrableAlone() async throws {
        let store = GroupCommitStore(
            backend: InMemoryBackend(),
            pacing: CommitPacing(lingerNanos: 0, deferNanos: 1_000_000),
            logger: quietLogger
        )
        try await store.commit([.createDevice(device("d"))])
        let outcomes = Outcomes()
        outcomes.submit(store, 0, [.enqueue(notification(1, device: "d"))], urgency: .deferrable)
        #expect(await outcomes.collect(1)[0]?.isSuccess == true)
        await store.close()
    }

    @Test("interval durability answers at once, commits later, and retries a failed transaction instead of losing it")
    func intervalMode() async throws {
        let backend = FailOnceBackend()
        let store = GroupCommitStore(
            backend: backend,
            durability: .interval(nanoseconds: 1_000_000),
            logger: quietLogger
        )
        let outcomes = Outcomes()
        outcomes.submit(store, 0, [.createDevice(device("d"))])
        outcomes.submit(store, 1, [.enqueue(notification(1, device: "d"))])
        // Answered before any transaction ran.
        #expect(await outcomes.collect(2).values.allSatisfy(\.isSuccess))

        var failures = backend.firstFailure.makeAsyncIterator()
        _ = await failures.next()  // the first commit failed; the batches wait for the next
        await store.close()  // commits what waits

        #expect(backend.inner.load().notifications.map(\.acceptanceID) == [1])
        #expect(store.batchesLost == 0)
        #expect(store.transactionsCommitted == 1)
    }

    /// Fails its first transaction only once the store it is given has begun to close: a close
    /// that meets a failing transaction.
    final class FailsAsItClosesBackend: StoreBackend {
        let inner = InMemoryBackend()
        /// Set by the test once the store exists: whether it has begun to close.
        let isClosing = NIOLockedValueBox<(@Sendable () -> Bool)?>(nil)
        private let failed = NIOLockedValueBox(false)
        let applying: AsyncStream<Void>
        private let signal: AsyncStream<Void>.Continuation

        init() {
            (applying, signal) = AsyncStream.makeStream()
        }

        func load() -> StoreSnapshot { inner.load() }

        func apply(_ group: [[StoreCommand]]) throws(StoreError) -> [Result<Void, StoreError>] {
            let first = failed.withLockedValue { failed in
                defer { failed = true }
                return !failed
            }
            if first {
                signal.yield()
                // Waits for a state, not for time: the test closes the store once told.
                while isClosing.withLockedValue({ $0?() }) != true { sched_yield() }
                throw StoreError(.database, "injected: disk full")
            }
            return inner.apply(group)
        }

        func close() {}
    }

    @Test("interval durability: a transaction that fails as the store closes is tried once more, not lost")
    func intervalFailureAtClose() async throws {
        let backend = FailsAsItClosesBackend()
        let store = GroupCommitStore(
            backend: backend,
            durability: .interval(nanoseconds: 1_000_000),
            logger: quietLogger
        )
        backend.isClosing.withLockedValue { $0 = { store.isClosing } }
        let outcomes = Outcomes()
        outcomes.submit(store, 0, [.createDevice(device("d"))])
        outcomes.submit(store, 1, [.enqueue(notification(1, device: "d"))])
        #expect(await outcomes.collect(2).values.allSatisfy(\.isSuccess))
        var applying = backend.applying.makeAsyncIterator()
        _ = await applying.next()
        await store.close()
        #expect(backend.inner.load().notifications.map(\.acceptanceID) == [1])
        #expect(store.batchesLost == 0)
    }

    /// The in-memory backend behind a disk that fills and empties on demand: while full, every
    /// transaction fails as SQLite's fails on ENOSPC.
    final class FillableBackend: StoreBackend {
        let inner = InMemoryBackend()
        let full = NIOLockedValueBox(false)

        func load() -> StoreSnapshot { inner.load() }

        func apply(_ group: [[StoreCommand]]) throws(StoreError) -> [Result<Void, StoreError>] {
            if full.withLockedValue({ $0 }) {
                throw StoreError(.unavailable, "cannot commit: SQLite error 13: database or disk is full")
            }
            return inner.apply(group)
        }

        func close() {}
    }

    @Test(
        "a storage fault makes the store unhealthy until a transaction commits; each change is logged once, not each failure"
    )
    func storageFaultHealth() async throws {
        let log = InMemoryLogHandler()
        let backend = FillableBackend()
        let store = GroupCommitStore(backend: backend, logger: Logger(label: "test") { _ in log })
        try await store.commit([.createDevice(device("d"))])
        #expect(store.health.canCommit)

        backend.full.withLockedValue { $0 = true }
        for id in 1...5 {
            await #expect(throws: StoreError(.unavailable, "cannot commit: SQLite error 13: database or disk is full"))
            {
                try await store.commit([.enqueue(notification(UInt64(id), device: "d"))])
            }
        }
        #expect(!store.health.canCommit)
        #expect(store.health.failure?.kind == .unavailable)
        #expect(store.health.failedTransactions == 5)

        backend.full.withLockedValue { $0 = false }
        try await store.commit([.enqueue(notification(6, device: "d"))])
        #expect(store.health.canCommit)
        #expect(store.health.failure == nil)
        #expect(backend.inner.load().notifications.map(\.acceptanceID) == [6])

        let lines = log.entries.map { "\($0.level) \($0.message)" }
        #expect(
            lines == [
                "error store cannot commit: cannot commit: SQLite error 13: database or disk is full",
                "notice store commits again after 5 failed batches",
            ]
        )
        await store.close()
    }

    @Test(
        "interval durability: while the storage fails, what was answered is retried and new batches are refused; nothing answered is lost"
    )
    func intervalModeStorageFault() async throws {
        let backend = FillableBackend()
        let store = GroupCommitStore(
            backend: backend,
            durability: .interval(nanoseconds: 1_000_000),
            logger: quietLogger
        )
        try await store.commit([.createDevice(device("d"))])
        try await eventually("the device's commit") { !backend.inner.load().devices.isEmpty }

        backend.full.withLockedValue { $0 = true }
        try await store.commit([.enqueue(notification(1, device: "d"))])  // answered at once
        try await eventually("a failed commit") { !store.health.canCommit }
        // The loss window stays one interval: nothing more is accepted while nothing commits.
        await #expect(throws: StoreError.self) { try await store.commit([.enqueue(notification(2, device: "d"))]) }

        backend.full.withLockedValue { $0 = false }
        try await eventually("the retried commit") { store.health.canCommit }
        try await store.commit([.enqueue(notification(3, device: "d"))])
        await store.close()
        #expect(backend.inner.load().notifications.map(\.acceptanceID) == [1, 3])
        #expect(store.batchesLost == 0)
    }
}
