import Logging
import PushgateStore
import PushgateStoreTestKit
import Testing

@testable import PushgateOperator

/// The totals since the store was created are written as additions: a count written twice stays
/// in the store for good.
@Suite("Durable totals", .timeLimit(.minutes(1)))
struct DurableTotalsTests {
    @Test(
        "a write while another is on its way adds only what came since; a write that failed is added by the next",
        arguments: [false, true]
    )
    func overlappingWrites(firstFails: Bool) async throws {
        let logger = Logger(label: "durable-totals-test") { _ in SwiftLogNoOpLogHandler() }
        let store = FaultyStore(wrapping: GroupCommitStore(backend: InMemoryBackend(), logger: logger))
        let totals = DurableTotals(store: store, logger: logger)
        store.holdNext(where: Self.isTotals)
        // The periodic write, held on its way; then the one at shutdown, with 2 more counted.
        async let periodic: Void = totals.persist(current: Self.received(5))
        await store.waitUntilHeld()
        await totals.persist(current: Self.received(7))
        store.release(failing: firstFails)
        await periodic
        // What the store holds if the process ends now: each count added once (5 and 2), or the 2
        // alone when the periodic write failed (its 5 wait for the next write, as any failed one).
        #expect(try store.load().totals["received"] == (firstFails ? 2 : 7))
        // The next write adds what the failed one did not.
        await totals.persist(current: Self.received(7))
        #expect(try store.load().totals["received"] == 7)
        await store.close()
    }

    private static let isTotals: FaultyStore.Match = { commands in
        commands.contains { if case .addTotals = $0 { true } else { false } }
    }

    private static func received(_ count: Int64) -> Totals {
        var totals = Totals()
        totals.received = count
        return totals
    }
}
