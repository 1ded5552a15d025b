import NIOCore
import NIOEmbedded
import Synchronization
import Testing

@testable import PushgateClusterNode

/// The node's small concurrency tools: forwarded work served once however often it comes,
/// claims taking turns per device, and lookups gathered into batches.
@Suite("Cluster node: forwarded work served once, claims in turn per device, lookups in batches")
struct ClusterNodeQueueTests {
    @Test("a second attempt at the same work gets the first answer, served once; other work is served")
    func servedOnce() async throws {
        let served = ServedWork(limit: 2)
        let loop = EmbeddedEventLoop()
        let count = Atomic<Int>(0)
        func answer(_ id: String, _ disposition: String) throws -> String? {
            try served.answer(id, on: loop) {
                count.add(1, ordering: .relaxed)
                return loop.makeSucceededFuture(ForwardedAnswer(disposition: disposition))
            }.wait().disposition
        }
        #expect(try answer("a", "delivered") == "delivered")
        #expect(try answer("a", "stored") == "delivered")
        #expect(count.load(ordering: .relaxed) == 1)
        #expect(try answer("b", "stored") == "stored")
        // A third id forgets the oldest: "a" is served again.
        #expect(try answer("c", "held") == "held")
        #expect(try answer("a", "coalesced") == "coalesced")
        #expect(count.load(ordering: .relaxed) == 4)
    }

    @Test("claims of one device take turns; another device's claim does not wait for them")
    func claimsInTurn() async throws {
        let queue = ClaimQueue()
        let (started, startedContinuation) = AsyncStream.makeStream(of: String.self)
        let (release, releaseContinuation) = AsyncStream.makeStream(of: Void.self)
        let order = Log()
        // The first claim of d1 waits until released.
        let first = Task {
            try await queue.serialize("d1") { @Sendable in
                startedContinuation.yield("d1 first")
                for await _ in release { break }
                order.entries.withLock { $0.append("d1 first") }
            }
        }
        var events = started.makeAsyncIterator()
        #expect(await events.next() == "d1 first")
        let second = Task {
            try await queue.serialize("d1") { order.entries.withLock { $0.append("d1 second") } }
        }
        // d2 runs while d1's first claim still waits.
        try await queue.serialize("d2") { order.entries.withLock { $0.append("d2") } }
        #expect(order.entries.withLock { $0 } == ["d2"])
        releaseContinuation.yield()
        try await first.value
        try await second.value
        #expect(order.entries.withLock { $0 } == ["d2", "d1 first", "d1 second"])
    }

    final class Log: Sendable {
        let entries = Mutex<[String]>([])
    }

    @Test("keys asked for while a batch runs are fetched together in the next; a missing key is nil")
    func lookupsInBatches() throws {
        let loop = EmbeddedEventLoop()
        let fetches = Fetches(loop)
        let lookups = BatchedLookups<String, Int>(concurrency: 1, batchLimit: 3) { fetches.fetch($0) }
        let a = lookups.value(of: "a", on: loop)
        #expect(fetches.asked() == [["a"]])
        // Asked meanwhile: waiting for the first batch to end. "b" twice is asked for once.
        let waiting = ["b", "c", "b", "d", "e"].map { lookups.value(of: $0, on: loop) }
        #expect(fetches.asked() == [["a"]])
        fetches.answer(0, ["a": 1])
        #expect(try a.wait() == 1)
        // The next batch: up to three keys; the rest wait for the one after.
        let second = fetches.asked()[1]
        #expect(second.count == 3)
        fetches.answer(1, ["b": 2, "c": 3, "d": 4])
        let third = fetches.asked()[2]
        #expect(Set(second + third) == ["b", "c", "d", "e"])
        fetches.answer(2, ["b": 2, "c": 3, "d": 4])  // no "e" in either: never registered
        #expect(try waiting.map { try $0.wait() } == [2, 3, 2, 4, nil])
        #expect(fetches.asked().count == 3)
    }

    @Test("a failed fetch fails its batch's lookups only; the next lookup is fetched again")
    func failedBatch() throws {
        let loop = EmbeddedEventLoop()
        let fetches = Fetches(loop)
        let lookups = BatchedLookups<String, Int>(concurrency: 2, batchLimit: 10) { fetches.fetch($0) }
        let a = lookups.value(of: "a", on: loop)
        let b = lookups.value(of: "b", on: loop)
        // Two runners: "b" does not wait for "a".
        #expect(fetches.asked() == [["a"], ["b"]])
        fetches.fail(0)
        fetches.answer(1, ["b": 2])
        #expect(throws: LookupFailed.self) { try a.wait() }
        #expect(try b.wait() == 2)
        let again = lookups.value(of: "a", on: loop)
        fetches.answer(2, ["a": 1])
        #expect(try again.wait() == 1)
    }

    struct LookupFailed: Error {}

    /// Fetches the test answers one by one.
    final class Fetches: Sendable {
        private let loop: EmbeddedEventLoop
        private let calls = Mutex<[(keys: [String], promise: EventLoopPromise<[String: Int]>)]>([])

        init(_ loop: EmbeddedEventLoop) { self.loop = loop }

        func fetch(_ keys: [String]) -> EventLoopFuture<[String: Int]> {
            let promise = loop.makePromise(of: [String: Int].self)
            calls.withLock { $0.append((keys.sorted(), promise)) }
            return promise.futureResult
        }

        func asked() -> [[String]] { calls.withLock { $0.map(\.keys) } }

        func answer(_ call: Int, _ values: [String: Int]) {
            calls.withLock { $0[call].promise }.succeed(values)
        }

        func fail(_ call: Int) { calls.withLock { $0[call].promise }.fail(LookupFailed()) }
    }
}
