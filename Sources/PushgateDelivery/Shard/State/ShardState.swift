import Logging
import NIOCore
import PushgateCrypto
import PushgateModel
import PushgateScheduler
import PushgateStore

/// The devices, registrations and queues of one shard, and the shard's scheduler: what the
/// gateway knows of its devices in memory, with no event loop, store or stream of its own.
///
/// Each change is planned here (`ShardPlan`): applied to memory at once, with the store
/// commands that make it durable and what to restore if they cannot be committed. The shard's
/// driver (`DeviceShard`) confines this to its event loop, carries plans out and writes to
/// streams; the scheduler (pure, no I/O) decides what each push, wake event and tick releases,
/// and this class turns its decisions into queue entries with sequence numbers and commands.
/// Held pushes keep their records here (`held`) and on disk with no seq.
final class ShardState {
    let clock: any DeliveryClock
    let configuration: DeliveryConfiguration
    let counters: DeliveryCounters
    let metrics: DeliveryMetrics
    let observer: (any DeliveryObserver)?
    let logger: Logger
    let nextAcceptanceID: @Sendable () -> UInt64
    /// Shared by the shards: every record entering `held` or a device's queue adds its cost,
    /// every one leaving subtracts it (`enteredMemory`, `leftMemory`).
    let queuedBudget: QueuedNotificationBudget

    var devices: [String: DeviceState] = [:]
    var registrations: [String: RegistrationState] = [:]
    /// Unregistered tokens by time of unregistration, oldest first: the sweep forgets them once
    /// their retention has passed, looking at the few that are due, not at every registration.
    var tombstones = CircularBuffer<(at: Int64, token: String)>()
    /// Devices with an open stream; `setStream` keeps it in step.
    var connectedDevices = 0
    /// Devices with queued notifications (for the expiry sweep and the gauges, which walk them
    /// without looking each up).
    var withQueue: [String: DeviceState] = [:]
    /// A device here has an owner (this shard is part of a node of several, `adopt`): only
    /// then do commits carry fences. A gateway alone on its store never sets it, and so never
    /// gathers the devices of each plan to find none of them owned.
    var ownsDevices = false
    /// One string per topic, shared by its registrations and pushes: comparing two of them is
    /// then a comparison of references, where separate copies cost a cache miss each (the admin
    /// overview compares the topic of every registration and push). Topics are apps' bundle ids,
    /// a small set; entries stay for the shard's life.
    var topicNames: [String: String] = [:]

    let scheduler: Scheduler
    /// Records of the pushes the scheduler holds, by acceptance id.
    var held: [UInt64: AcceptedPush] = [:]
    /// Held pushes whose commit has not completed, and the budget found empty when they were
    /// held: their `held` event goes out with the commit, or just before their `dropped` event
    /// when a later push drops them first, so that no `dropped` event goes out without its
    /// `held` before it (a release taking one out of `held` would silence it the same way).
    /// Kept only while someone listens: a listener that arrives between a push's acceptance and
    /// its commit sees no `held` event for it.
    var heldUnannounced: [UInt64: (record: AcceptedPush, emptyBudget: BudgetScope?)] = [:]
    /// Who the scheduler's handles are, for bucket keys and drops.
    var deviceIDs: [DeviceHandle: String] = [:]
    var appTokens: [AppHandle: String] = [:]

    init(
        clock: any DeliveryClock,
        configuration: DeliveryConfiguration,
        counters: DeliveryCounters,
        metrics: DeliveryMetrics,
        observer: (any DeliveryObserver)?,
        logger: Logger,
        queuedBudget: QueuedNotificationBudget,
        nextAcceptanceID: @escaping @Sendable () -> UInt64
    ) throws(SchedulerConfigurationError) {
        self.clock = clock
        self.configuration = configuration
        self.counters = counters
        self.metrics = metrics
        self.observer = observer
        self.logger = logger
        self.queuedBudget = queuedBudget
        self.nextAcceptanceID = nextAcceptanceID
        self.scheduler = try Scheduler(configuration: configuration.scheduler)
    }

    /// `topic` as the shard's one copy of it.
    func interned(_ topic: String) -> String {
        if let name = topicNames[topic] { return name }
        topicNames[topic] = topic
        return topic
    }

    /// The device if `secret` is its secret; nil otherwise (unknown device or wrong secret alike).
    func authenticate(deviceID: String, secret: String) -> DeviceState? {
        guard let device = devices[deviceID] else { return nil }
        return constantTimeEquals(SHA256.hash(secret.utf8), device.secretHash) ? device : nil
    }

    /// The one way a device's current stream changes, so that the count of connected devices
    /// follows it.
    func setStream(_ stream: StreamBinding?, of device: DeviceState) {
        connectedDevices += (stream == nil ? 0 : 1) - (device.stream == nil ? 0 : 1)
        device.stream = stream
    }

    /// A record entered the held set or a device's queue: its cost counts against the budget
    /// until it leaves both.
    func enteredMemory(_ record: AcceptedPush) {
        queuedBudget.add(QueuedNotificationBudget.cost(payloadBytes: record.push.payload.count))
    }

    /// A record left the held set or a device's queue.
    func leftMemory(_ record: AcceptedPush) {
        queuedBudget.release(QueuedNotificationBudget.cost(payloadBytes: record.push.payload.count))
    }

    // MARK: Telling operators

    /// A push that leaves undelivered (the caller counts it): told to the observer, and logged
    /// by apns-id and device.
    func announceDrop(_ record: AcceptedPush, _ reason: DropReason) {
        announceHeld(record.acceptanceID)
        notable(.dropped, record, reason.rawValue)
        logger.debug(
            "push dropped",
            metadata: [
                LogMetadataKey.apnsID: "\(record.push.apnsID)", LogMetadataKey.device: "\(record.deviceID)",
                "push.drop_reason": "\(reason.rawValue)",
            ]
        )
    }

    /// The `held` event of a push whose commit was waited for, once.
    func announceHeld(_ acceptanceID: UInt64) {
        guard let waiting = heldUnannounced.removeValue(forKey: acceptanceID) else { return }
        notable(.held, waiting.record, Self.holdDetail(waiting.record, emptyBudget: waiting.emptyBudget))
    }

    /// Why a push was held, in a few words, for the admin stream.
    static func holdDetail(_ record: AcceptedPush, emptyBudget: BudgetScope?) -> String {
        if let emptyBudget { return "\(emptyBudget.rawValue) budget empty" }
        switch (record.push.pushClass, record.push.priority) {
        case (_, .low): return "priority 1: waits for a wake event"
        case (.silent, _): return "silent: waits for its budget or a wake event"
        case (.regular, _): return "priority 5: deferred"
        }
    }

    /// A line about one device (debug: per request, not per push).
    func logDevice(
        _ message: @autoclosure () -> Logger.Message,
        _ device: String,
        _ metadata: @autoclosure () -> Logger.Metadata = [:]
    ) {
        logger.debug(message(), metadata: metadata().merging([LogMetadataKey.device: "\(device)"]) { $1 })
    }

    /// Tells the observer, if anyone listens.
    func notable(_ kind: NotableEvent.Kind, _ record: AcceptedPush, _ detail: @autoclosure () -> String) {
        guard let observer, observer.isListening else { return }
        observer.notable(
            NotableEvent(
                kind: kind,
                time: clock.nowMillis(),
                deviceID: record.deviceID,
                apnsID: record.push.apnsID,
                topic: record.push.topic,
                detail: detail()
            )
        )
    }
}
