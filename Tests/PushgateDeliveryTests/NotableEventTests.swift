import NIOConcurrencyHelpers
import PushgateDelivery
import PushgateModel
import PushgateScheduler
import PushgateStore
import Testing

/// The admin stream's notable events as delivery emits them, whatever the order in which
/// commits complete.
@Suite("Notable events", .timeLimit(.minutes(1)))
struct NotableEventTests {
    static let topic = "com.example.news"

    final class Recorder: DeliveryObserver {
        private let recorded = NIOLockedValueBox<[NotableEvent]>([])
        var isListening: Bool { true }
        func notable(_ event: NotableEvent) { recorded.withLockedValue { $0.append(event) } }
        func kinds(of apnsID: String) -> [NotableEvent.Kind] {
            recorded.withLockedValue { $0.filter { $0.apnsID == apnsID }.map(\.kind) }
        }
    }

    @Test("a held push that a later one drops before its own commit completes: held, then dropped, never dropped alone")
    func heldBeforeDropped() async throws {
        let recorder = Recorder()
        try await DeliveryHarness.run(
            observer: recorder,
            { configuration in
                configuration.scheduler = SchedulerConfiguration(
                    global: SchedulerPolicy(
                        appBurst: 100,
                        appRefillPerHour: 100,
                        deviceBurst: 100,
                        deviceRefillPerHour: 100,
                        maxHeldPerApp: 1,
                        maxDeferralMillis: 15 * 60 * 1000
                    )
                )
            }
        ) { h in
            let device = try await h.device()
            let token = try await h.register(device, Self.topic)
            let first = UUIDs.next()
            h.store.holdNext { commands in
                commands.contains { if case .enqueue(let record) = $0 { record.push.apnsID == first } else { false } }
            }
            let held = h.core.accept(
                Push(
                    deviceToken: token,
                    apnsID: first,
                    topic: Self.topic,
                    pushType: .background,
                    priority: .normal,
                    collapseID: nil,
                    payload: Array(#"{"aps":{"content-available":1}}"#.utf8)
                ),
                expiration: .defaultLifetime
            )
            await h.store.waitUntilHeld()
            // Silent pushes to an offline device are held, one per app here: the next drops the
            // first while the first's commit waits.
            let second = UUIDs.next()
            #expect(try await h.silent(token, Self.topic, apnsID: second) == .held)
            h.store.release(failing: false)
            #expect(try await held.get() == .held)
            #expect(recorder.kinds(of: first) == [.held, .dropped])
            #expect(recorder.kinds(of: second) == [.held])
        }
    }
}
