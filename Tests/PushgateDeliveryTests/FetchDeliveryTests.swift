import PushgateDelivery
import PushgateModel
import PushgateStore
import PushgateStoreTestKit
import PushgateTestKit
import Testing

/// Background fetch through the delivery core: windows opened by silent pushes as they are
/// written, results reported and refused, timeouts, and a restart inside a window.
@Suite("Delivery: background fetch", .timeLimit(.minutes(1)))
struct FetchDeliveryTests {
    static let topic = "com.example.news"

    /// A new device with the topic registered and its stream open, which has received one silent
    /// push (seq 1): its fetch window is open.
    static func openWindow(_ h: DeliveryHarness) async throws -> DeliveryHarness.Device {
        let device = try await h.device()
        let token = try await h.register(device, topic)
        let sink = try await h.connect(device)
        #expect(try await h.silent(token, topic) == .delivered)
        _ = await sink.events(count: 1)
        return device
    }

    private func refusal(_ body: () async throws -> Void) async -> Refusal? {
        do {
            try await body()
            return nil
        } catch {
            return error as? Refusal
        }
    }

    @Test("a silent push's event carries its window; a result counts once, on disk; an alert opens no window")
    func reportCounts() async throws {
        try await DeliveryHarness.run { h in
            let device = try await h.device()
            let token = try await h.register(device, Self.topic)
            let sink = try await h.connect(device)
            #expect(try await h.silent(token, Self.topic) == .delivered)
            #expect(try await h.push(token, Self.topic) == .delivered)
            let events = await sink.events(count: 2)
            #expect(events.map(\.fetchWindowSeconds) == [30, nil])

            let twice = await refusal {
                try await h.core.reportFetchResults(
                    deviceID: device.id,
                    secret: device.secret,
                    results: [(1, .newData), (1, .newData)]
                ).get()
            }
            #expect(twice?.detail.contains("appears twice") == true)
            #expect(h.core.counters.fetchResults[.newData] == 0, "all or nothing")
            try await h.core.reportFetchResults(deviceID: device.id, secret: device.secret, results: [(1, .newData)])
                .get()
            #expect(h.core.counters.fetchResults[.newData] == 1)
            let commands = h.store.passed.flatMap { $0 }
            #expect(
                commands.contains(
                    .openFetchWindows([
                        FetchWindowRecord(deviceID: device.id, seq: 1, token: token, openedAt: DeliveryHarness.start)
                    ])
                )
            )
            #expect(commands.contains(.closeFetchWindows(deviceID: device.id, seqs: [1])))
            #expect(
                commands.contains {
                    if case .saveFetchStates(let states) = $0 { states.map(\.token) == [token] } else { false }
                }
            )

            let again = await refusal {
                try await h.core.reportFetchResults(deviceID: device.id, secret: device.secret, results: [(1, .noData)])
                    .get()
            }
            #expect(again?.reason == .badFetchResult)
            #expect(again?.detail.contains("already reported (newData)") == true)
            let alert = await refusal {
                try await h.core.reportFetchResults(
                    deviceID: device.id,
                    secret: device.secret,
                    results: [(2, .newData)]
                ).get()
            }
            #expect(alert?.detail.contains("is not a silent push (its push type is alert)") == true)
            let unknown = await refusal {
                try await h.core.reportFetchResults(
                    deviceID: device.id,
                    secret: device.secret,
                    results: [(9, .newData)]
                ).get()
            }
            #expect(unknown?.detail.contains("never sent") == true)
            #expect(h.core.counters.fetchResults[.newData] == 1, "refused results count nothing")
            let wrongSecret = await refusal {
                try await h.core.reportFetchResults(deviceID: device.id, secret: "nope", results: []).get()
            }
            #expect(wrongSecret == .unauthorized)
        }
    }

    @Test("no report within the window: a timeout, from the window's end, and a late report is refused")
    func timeout() async throws {
        try await DeliveryHarness.run { h in
            let device = try await Self.openWindow(h)
            h.clock.advance(by: 29_999)
            try await h.core.advanceSchedulers()
            #expect(h.core.counters.fetchResults[.timeout] == 0)
            h.clock.advance(by: 1)
            try await h.core.advanceSchedulers()
            #expect(h.core.counters.fetchResults[.timeout] == 1)
            let late = await refusal {
                try await h.core.reportFetchResults(
                    deviceID: device.id,
                    secret: device.secret,
                    results: [(1, .newData)]
                ).get()
            }
            #expect(late?.detail.contains("counted as a timeout") == true)
            #expect(h.store.passed.flatMap { $0 }.contains(.closeFetchWindows(deviceID: device.id, seqs: [1])))
        }
    }

    @Test("a restart inside a window: the window keeps its time, a result counts, no timeout is invented")
    func restartInsideAWindow() async throws {
        let storage = InMemoryStorage()
        let clock = TestClock(DeliveryHarness.start)
        var device: DeliveryHarness.Device?
        try await DeliveryHarness.run(storage: storage, clock: clock) { h in
            let created = try await Self.openWindow(h)
            device = created
            // A later commit is on disk only after the window's: group commits keep their order.
            try await h.core.ack(deviceID: created.id, secret: created.secret, upTo: 1).get()
        }
        let restarted = try #require(device)
        clock.advance(by: 20_000)
        try await DeliveryHarness.run(storage: storage, clock: clock) { h in
            try await h.core.advanceSchedulers()
            #expect(h.core.counters.fetchResults[.timeout] == 0)
            try await h.core.reportFetchResults(
                deviceID: restarted.id,
                secret: restarted.secret,
                results: [(1, .failed)]
            ).get()
        }
        clock.advance(by: 60_000)
        try await DeliveryHarness.run(storage: storage, clock: clock) { h in
            try await h.core.advanceSchedulers()
            #expect(h.core.counters.fetchResults[.timeout] == 0, "the result was kept: nothing to time out")
            let again = await refusal {
                try await h.core.reportFetchResults(
                    deviceID: restarted.id,
                    secret: restarted.secret,
                    results: [(1, .newData)]
                ).get()
            }
            #expect(again?.reason == .badFetchResult)
        }
        #expect(InMemoryBackend(storage: storage).load().fetchStates.first?.resultCount == 1)
    }

    @Test("a window that ended while the gateway was down is a timeout at start")
    func restartAfterAWindow() async throws {
        let storage = InMemoryStorage()
        let clock = TestClock(DeliveryHarness.start)
        try await DeliveryHarness.run(storage: storage, clock: clock) { h in
            let device = try await Self.openWindow(h)
            try await h.core.ack(deviceID: device.id, secret: device.secret, upTo: 1).get()
        }
        clock.advance(by: 3_600_000)
        try await DeliveryHarness.run(storage: storage, clock: clock) { h in
            try await h.core.advanceSchedulers()
            #expect(h.core.counters.fetchResults[.timeout] == 1)
            // A commit after the timeout's: once it is on disk, so is the timeout's.
            _ = try await h.device()
        }
        let stored = InMemoryBackend(storage: storage).load()
        #expect(stored.fetchWindows.isEmpty)
        #expect(stored.fetchStates.first?.penaltyUntil == DeliveryHarness.start + 30_000 + 86_400_000)
    }

    @Test("a report whose commit fails counts nothing: the agent's retry counts it once")
    func failedCommit() async throws {
        try await DeliveryHarness.run { h in
            let device = try await Self.openWindow(h)
            h.store.failNext { $0.contains { if case .closeFetchWindows = $0 { true } else { false } } }
            let failed = await refusal {
                try await h.core.reportFetchResults(deviceID: device.id, secret: device.secret, results: [(1, .noData)])
                    .get()
            }
            #expect(failed?.reason == .serviceUnavailable)
            #expect(h.core.counters.fetchResults[.noData] == 0)
            try await h.core.reportFetchResults(deviceID: device.id, secret: device.secret, results: [(1, .noData)])
                .get()
            #expect(h.core.counters.fetchResults[.noData] == 1)
        }
    }

    @Test("a push reported but not acknowledged, written again after a restart, opens no second window")
    func noSecondWindowAfterARestart() async throws {
        let storage = InMemoryStorage()
        let clock = TestClock(DeliveryHarness.start)
        var device: DeliveryHarness.Device?
        try await DeliveryHarness.run(storage: storage, clock: clock) { h in
            let created = try await Self.openWindow(h)
            device = created
            try await h.core.reportFetchResults(deviceID: created.id, secret: created.secret, results: [(1, .newData)])
                .get()
        }
        let restarted = try #require(device)
        clock.advance(by: 5_000)
        try await DeliveryHarness.run(storage: storage, clock: clock) { h in
            let sink = try await h.connect(restarted)
            let events = await sink.events(count: 1)
            #expect(events.map(\.seq) == [1], "unacknowledged: written again")
            clock.advance(by: 60_000)
            try await h.core.advanceSchedulers()
            #expect(
                h.core.counters.fetchResults[.timeout] == 0,
                "its window was closed by the result before the restart"
            )
            try await h.core.ack(deviceID: restarted.id, secret: restarted.secret, upTo: 1).get()
        }
        let stored = InMemoryBackend(storage: storage).load()
        #expect(stored.fetchWindows.isEmpty, "closed and acknowledged: forgotten")
        #expect(stored.fetchStates.first?.resultCount == 1)
    }
}
