import Logging
import NIOCore
import PushgateModel
import PushgateScheduler
import PushgateStore

/// The devices, registrations and queues of one shard, owned by one event loop.
///
/// Every method runs on `eventLoop`; the core routes each request here by the shard byte of the
/// device id or token, so no lock is taken on the delivery path. State changes are made in
/// memory first, committed to the store, and acknowledged (to the provider or agent) only when
/// the commit completes; a failed commit is undone.
///
/// The shard's `Scheduler` (pure, no I/O) decides what each push, wake event and tick releases;
/// this class turns its decisions into queue entries with sequence numbers, store commands and
/// stream writes. Held pushes keep their records here (`held`) and on disk with no seq.
final class DeviceShard {
    let eventLoop: any EventLoop
    let store: any NotificationStore
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
    /// Store completions come back through it, many per loop task.
    let completions: LoopInbox

    var devices: [String: DeviceState] = [:]
    var registrations: [String: RegistrationState] = [:]
    /// Unregistered tokens by time of unregistration, oldest first: the sweep forgets them once
    /// their retention has passed, looking at the few that are due, not at every registration.
    var tombstones = CircularBuffer<(at: Int64, token: String)>()
    /// Devices with an open stream; `setStream` keeps it in step.
    var connectedDevices = 0
    /// Every open stream, by when it may need a heartbeat (`heartbeat()`): its device and its
    /// generation, not the stream itself, which holds its connection (and through it this shard)
    /// until a later tick would drop it.
    var heartbeats: HeartbeatWheel<(device: DeviceState, generation: UInt64)>
    /// Devices with queued notifications (for the expiry sweep and the gauges, which walk them
    /// without looking each up).
    var withQueue: [String: DeviceState] = [:]
    var streamGenerations: UInt64 = 0
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
    /// The one timer of the shard's scheduler, armed for its next deadline.
    var schedulerTimer: Scheduled<Void>?
    var schedulerTimerAt: Int64 = .max
    /// Set as the gateway stops: no scheduler timer is armed again, so none fires after the
    /// store has closed (its commit would fail and be logged as an error).
    var schedulerStopped = false

    /// `topic` as the shard's one copy of it.
    func interned(_ topic: String) -> String {
        if let name = topicNames[topic] { return name }
        topicNames[topic] = topic
        return topic
    }

    init(
        eventLoop: any EventLoop,
        store: any NotificationStore,
        clock: any DeliveryClock,
        configuration: DeliveryConfiguration,
        counters: DeliveryCounters,
        metrics: DeliveryMetrics,
        observer: (any DeliveryObserver)?,
        logger: Logger,
        queuedBudget: QueuedNotificationBudget,
        nextAcceptanceID: @escaping @Sendable () -> UInt64
    ) throws(SchedulerConfigurationError) {
        self.eventLoop = eventLoop
        self.store = store
        self.clock = clock
        self.configuration = configuration
        heartbeats = HeartbeatWheel(
            tickMillis: configuration.heartbeatTickMillis,
            horizonMillis: configuration.heartbeatIntervalMillis,
            nowMillis: clock.nowMillis()
        )
        self.counters = counters
        self.metrics = metrics
        self.observer = observer
        self.logger = logger
        self.nextAcceptanceID = nextAcceptanceID
        self.queuedBudget = queuedBudget
        self.completions = LoopInbox(loop: eventLoop)
        self.scheduler = try Scheduler(configuration: configuration.scheduler)
    }

    /// A push that leaves undelivered (the caller counts it): told to the observer, and logged
    /// by apns-id and device.
    func dropped(_ record: AcceptedPush, _ reason: DropReason) {
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
