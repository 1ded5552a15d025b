import NIOEmbedded
import Synchronization
import Testing

@testable import PushgateClusterNode

/// The node's two small concurrency tools: forwarded work served once however often it comes,
/// and claims taking turns per device.
@Suite("Cluster node: forwarded work served once, claims in turn per device")
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
}
