import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import PushgateDelivery
import PushgateModel
import PushgateStore
import PushgateStoreTestKit
import PushgateTestKit

/// A delivery core on one event loop, an in-memory store that fails commits on demand, and a test
/// clock: no sockets, no HTTP, no disk.
struct DeliveryHarness {
    static let start: Int64 = 1_800_000_000_000

    let core: DeliveryCore
    let store: FaultyStore
    let clock: TestClock

    /// `storage` outlives the harness: a second run over it is a restart. `logger`: the core's
    /// and the store's (critical only when none is given).
    static func run(
        storage: InMemoryStorage = InMemoryStorage(),
        clock: TestClock = TestClock(start),
        logger: Logger? = nil,
        observer: (any DeliveryObserver)? = nil,
        _ configure: (inout DeliveryConfiguration) -> Void = { _ in },
        _ body: (DeliveryHarness) async throws -> Void
    ) async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        var configuration = DeliveryConfiguration()
        configure(&configuration)
        let logger =
            logger
            ?? {
                var logger = Logger(label: "delivery-test")
                logger.logLevel = .critical
                return logger
            }()
        let store = FaultyStore(wrapping: GroupCommitStore(backend: InMemoryBackend(storage: storage), logger: logger))
        let core = try DeliveryCore(
            group: group,
            store: store,
            clock: clock,
            configuration: configuration,
            observer: observer,
            logger: logger
        )
        try await core.restore()
        // The store is closed at the end, which waits for its last batches: a commit nobody
        // awaits (the sweep's) must be on `storage` before a second run reads it as a restart.
        do {
            try await body(DeliveryHarness(core: core, store: store, clock: clock))
        } catch {
            try await group.shutdownGracefully()
            await store.close()
            throw error
        }
        try await group.shutdownGracefully()
        await store.close()
    }

    struct Device {
        var id: String
        var secret: String
    }

    func device() async throws -> Device {
        let created = try await core.createDevice().get()
        return Device(id: created.deviceID, secret: created.secret)
    }

    func register(_ device: Device, _ topic: String) async throws -> String {
        try await core.register(deviceID: device.id, secret: device.secret, topic: topic).get()
    }

    /// Opens the device's stream and binds a recording sink to it.
    func connect(_ device: Device, lastEventID: UInt64? = nil) async throws -> RecordingSink {
        try await stream(device, lastEventID: lastEventID).sink
    }

    /// `connect`, with the stream's generation for `closeStream`.
    func stream(_ device: Device, lastEventID: UInt64? = nil) async throws -> (sink: RecordingSink, generation: UInt64)
    {
        let generation = try await core.openStream(deviceID: device.id, secret: device.secret, lastEventID: lastEventID)
            .get()
        let sink = RecordingSink()
        core.bindStream(deviceID: device.id, generation: generation, sink: sink)
        return (sink, generation)
    }

    func push(
        _ token: String,
        _ topic: String,
        apnsID: String = UUIDs.next(),
        type: PushType = .alert,
        priority: PushPriority = .high,
        collapseID: String? = nil,
        expiration: Expiration = .defaultLifetime
    ) async throws -> Disposition {
        let payload = type == .background ? #"{"aps":{"content-available":1}}"# : #"{"aps":{"alert":"hi"}}"#
        let push = Push(
            deviceToken: token,
            apnsID: apnsID,
            topic: topic,
            pushType: type,
            priority: priority,
            collapseID: collapseID,
            payload: Array(payload.utf8)
        )
        return try await core.accept(push, expiration: expiration).get()
    }

    func silent(_ token: String, _ topic: String, apnsID: String = UUIDs.next()) async throws -> Disposition {
        try await push(token, topic, apnsID: apnsID, type: .background, priority: .normal)
    }
}

/// Distinct canonical apns-ids, in order.
enum UUIDs {
    private static let counter = NIOLockedValueBox(0)

    static func next() -> String {
        let n = counter.withLockedValue { value in
            value += 1
            return value
        }
        let hex = String(n, radix: 16)
        return "00000000-0000-4000-8000-" + String(repeating: "0", count: 12 - hex.count) + hex
    }
}
