import InMemoryLogging
import Logging
import PushgateDelivery
import PushgateModel
import PushgateStore
import Testing

/// Log lines about one push or one device carry its `apns-id` or `device` (docs/operators.md "Logs"), so
/// that a log collector finds everything about either.
@Suite("Log metadata: apns-id and device")
struct LogMetadataTests {
    static let topic = "com.example.logs"

    /// A logger that keeps what it is given, from debug up.
    static func recording() -> (Logger, InMemoryLogHandler) {
        var handler = InMemoryLogHandler()
        handler.logLevel = .debug
        return (Logger(label: "test") { _ in handler }, handler)
    }

    static func line(_ message: String, in handler: InMemoryLogHandler) -> Logger.Metadata? {
        handler.entries.first { $0.message.description == message }?.metadata
    }

    @Test("a push whose commit fails: the error line names its apns-id and device")
    func failedCommit() async throws {
        let (logger, handler) = Self.recording()
        try await DeliveryHarness.run(logger: logger) { h in
            let device = try await h.device()
            let token = try await h.register(device, Self.topic)
            h.store.failNext(where: { $0.contains { if case .enqueue = $0 { true } else { false } } })
            let apnsID = UUIDs.next()
            await #expect(throws: Refusal.self) { try await h.push(token, Self.topic, apnsID: apnsID) }
            let failed = try #require(Self.line("store commit failed", in: handler))
            #expect(
                failed[LogMetadataKey.apnsID] == "\(apnsID)" && failed[LogMetadataKey.device] == "\(device.id)",
                "\(failed)"
            )
        }
    }

    @Test("a dropped push's line names its apns-id, device and reason")
    func droppedPush() async throws {
        let (logger, handler) = Self.recording()
        try await DeliveryHarness.run(logger: logger) { h in
            let device = try await h.device()
            let token = try await h.register(device, Self.topic)
            _ = try await h.connect(device)
            let replaced = UUIDs.next()
            #expect(try await h.push(token, Self.topic, apnsID: replaced, priority: .low, collapseID: "c") == .held)
            #expect(try await h.push(token, Self.topic, priority: .low, collapseID: "c") == .coalesced)
            let dropped = try #require(Self.line("push dropped", in: handler))
            #expect(
                dropped == [
                    LogMetadataKey.apnsID: "\(replaced)", LogMetadataKey.device: "\(device.id)",
                    "push.drop_reason": "coalesced",
                ]
            )
        }
    }

    @Test("a device's stream opening and closing, and its deletion, are logged with its id")
    func deviceLines() async throws {
        let (logger, handler) = Self.recording()
        try await DeliveryHarness.run(logger: logger) { h in
            let device = try await h.device()
            let generation = try await h.core.openStream(deviceID: device.id, secret: device.secret, lastEventID: nil)
                .get()
            h.core.closeStream(deviceID: device.id, generation: generation)
            try await h.core.deleteDevice(deviceID: device.id, secret: device.secret).get()
            for message in ["device created", "event stream opened", "event stream closed", "device deleted"] {
                #expect(Self.line(message, in: handler)?[LogMetadataKey.device] == "\(device.id)", "\(message)")
            }
        }
    }
}
