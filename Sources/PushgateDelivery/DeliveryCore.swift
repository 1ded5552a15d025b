import Logging
import NIOConcurrencyHelpers
import NIOCore
import PushgateCrypto
import PushgateModel
import PushgateScheduler
import PushgateStore
import Synchronization

/// Devices, registrations and per-device queues, sharded over the event loops; the durable
/// store behind them. Entry point for the provider and device APIs.
public final class DeliveryCore: Sendable {
    let shards: [ShardHandle]
    private let store: any NotificationStore
    private let configuration: DeliveryConfiguration
    private let acceptanceIDs = AcceptanceIDs()
    private let maintenance = NIOLockedValueBox<[RepeatedTask]>([])
    public let counters = DeliveryCounters()
    /// Devices the shards let go because the store fenced a commit (a node of several).
    public let releases = DeviceReleases()
    /// What waiting notifications take in memory, all shards together.
    public let queuedBudget: QueuedNotificationBudget

    public init(
        group: any EventLoopGroup,
        store: any NotificationStore,
        clock: any DeliveryClock = SystemClock(),
        configuration: DeliveryConfiguration = DeliveryConfiguration(),
        metrics: DeliveryMetrics = .none,
        observer: (any DeliveryObserver)? = nil,
        logger: Logger
    ) throws(SchedulerConfigurationError) {
        self.store = store
        self.configuration = configuration
        let queuedBudget = QueuedNotificationBudget(limit: configuration.queuedNotificationBudgetBytes)
        self.queuedBudget = queuedBudget
        let ids = self.acceptanceIDs
        var shards: [ShardHandle] = []
        let counters = self.counters
        let releases = self.releases
        for loop in group.makeIterator() {
            let state = try ShardState(
                clock: clock,
                configuration: configuration,
                counters: counters,
                metrics: metrics,
                observer: observer,
                logger: logger,
                queuedBudget: queuedBudget,
                nextAcceptanceID: { ids.next() }
            )
            let shard = DeviceShard(eventLoop: loop, store: store, state: state, releases: releases)
            shards.append(ShardHandle(shard, on: loop))
        }
        self.shards = shards
    }

    /// Restores every device, registration and queued notification from the store. Call once,
    /// before serving. Returns the store's durable totals, which delivery does not keep (the
    /// operator console does).
    @discardableResult
    public func restore() async throws -> [String: Int64] {
        let snapshot = try store.load()
        acceptanceIDs.continue(after: snapshot.maxAcceptanceID)
        var parts = Array(repeating: ShardSnapshot(), count: shards.count)
        for record in snapshot.buckets {
            // `device:<id>` and `app:<token>` both carry the shard byte after the prefix.
            let hex = record.key.split(separator: ":", maxSplits: 1).last.map(String.init) ?? ""
            if let i = shardIndex(of: hex) { parts[i].buckets.append(record) }
        }
        for record in snapshot.fetchStates {
            if let i = shardIndex(of: record.token) { parts[i].fetchStates.append(record) }
        }
        for record in snapshot.fetchWindows {
            if let i = shardIndex(of: record.deviceID) { parts[i].fetchWindows.append(record) }
        }
        for record in snapshot.devices { if let i = shardIndex(of: record.id) { parts[i].devices.append(record) } }
        for record in snapshot.registrations {
            if let i = shardIndex(of: record.token) { parts[i].registrations.append(record) }
        }
        for record in snapshot.notifications {
            if let i = shardIndex(of: record.deviceID) { parts[i].notifications.append(record) }
        }
        for (shard, part) in zip(shards, parts) {
            try await shard.submit { $0.load(part) }.get()
        }
        return snapshot.totals
    }

    /// Takes a device over (a node of several, which just claimed it under `owner`): its records
    /// as the store has them, one device's worth (`devices` holds the one device).
    public func adopt(_ records: StoreSnapshot, owner: DeviceOwner) async throws {
        guard let id = records.devices.first?.id, let shard = shard(of: id) else { return }
        let part = ShardSnapshot(
            devices: records.devices,
            registrations: records.registrations,
            buckets: records.buckets,
            fetchStates: records.fetchStates,
            notifications: records.notifications,
            fetchWindows: records.fetchWindows
        )
        try await shard.submit { $0.adopt(part, owner: owner) }.get()
    }

    /// Forgets a device another node owns now, and ends its stream.
    public func release(deviceID: String) async throws {
        guard let shard = shard(of: deviceID) else { return }
        try await shard.submit { $0.release(deviceID) }.get()
    }

    /// The devices this node holds, with their ownership (a node of several).
    public func owners() async throws -> [String: DeviceOwner] {
        var owners: [String: DeviceOwner] = [:]
        for shard in shards {
            let part = try await shard.submit { shard in
                shard.state.devices.compactMapValues(\.owner)
            }.get()
            owners.merge(part) { $1 }
        }
        return owners
    }

    /// Starts heartbeats and the expiry sweep on every shard.
    public func startMaintenance() {
        let heartbeat = TimeAmount.milliseconds(configuration.heartbeatTickMillis)
        let sweep = TimeAmount.milliseconds(configuration.expirySweepIntervalMillis)
        var tasks: [RepeatedTask] = []
        for shard in shards {
            tasks.append(shard.repeatEvery(heartbeat) { $0.heartbeat() })
            tasks.append(shard.repeatEvery(sweep) { $0.sweepExpired() })
        }
        maintenance.withLockedValue { $0 += tasks }
    }

    /// Stops the heartbeats, the sweep and the schedulers' timers, on every shard's loop; once
    /// it returns nothing of the core's own commits again (the store may close).
    public func stopMaintenance() async {
        let tasks = maintenance.withLockedValue { tasks in
            defer { tasks = [] }
            return tasks
        }
        for task in tasks { task.cancel() }
        for shard in shards { try? await shard.submit { $0.stopSchedulerTimer() }.get() }
    }

    /// One heartbeat tick on every shard, as `startMaintenance`'s timer runs it.
    @_spi(Testing) public func heartbeatTick() async throws {
        for shard in shards { try await shard.submit { $0.heartbeat() }.get() }
    }

    /// The longest a device's stream stays silent (`DeliveryConfiguration.heartbeatIntervalMillis`),
    /// announced to agents with the stream.
    public var heartbeatIntervalMillis: Int64 { configuration.heartbeatIntervalMillis }

    /// Shards whose scheduler timer is armed.
    @_spi(Testing) public func armedSchedulerTimers() async throws -> Int {
        var armed = 0
        for shard in shards where try await shard.submit({ $0.schedulerTimer != nil }).get() { armed += 1 }
        return armed
    }

    /// Puts a reloaded scheduler policy in force on every shard, each on its own loop, queued
    /// behind the work already there: the delivery path takes no lock for it. What it does to
    /// the state already there is `Scheduler.reconfigure`'s. Throws, changing nothing, when the
    /// configuration is not valid; the future succeeds once every shard runs it.
    public func reconfigure(
        scheduler configuration: SchedulerConfiguration
    ) throws(SchedulerConfigurationError) -> EventLoopFuture<Void> {
        try configuration.validate()
        let applied = shards.map { shard in shard.submit { try $0.reconfigure(scheduler: configuration) } }
        return EventLoopFuture.andAllSucceed(applied, on: shards[0].eventLoop)
    }

    /// Runs the expiry sweep now on every shard (the periodic one runs on its own).
    public func sweepExpired() async throws {
        for shard in shards { try await shard.submit { $0.sweepExpired() }.get() }
    }

    /// Runs every shard's scheduler for the current time now (its own timers do this when
    /// deadlines come; tests with an injected clock call this after moving it).
    public func advanceSchedulers() async throws {
        for shard in shards { try await shard.submit { $0.advanceScheduler() }.get() }
    }

    /// Slots the device's queue has room for, whatever it holds now; nil for an unknown device.
    /// Tests check with it that a drained backlog gives its memory back.
    func queueCapacity(deviceID: String) async throws -> Int? {
        guard let shard = shard(of: deviceID) else { return nil }
        return try await shard.submit { $0.state.queueCapacity(deviceID: deviceID) }.get()
    }

    // MARK: Device API

    public func createDevice() -> EventLoopFuture<(deviceID: String, secret: String)> {
        let loop = shards[0].eventLoop
        let id: String
        let secret: String
        do {
            id = try Identifiers.newDeviceID()
            secret = try Identifiers.newSecret()
        } catch {
            return loop.makeFailedFuture(Refusal(.internalServerError, "\(error)"))
        }
        let shard = self.shard(of: id)!
        let promise = shard.eventLoop.makePromise(of: Void.self)
        let hash = SHA256.hash(secret.utf8)
        shard.execute { $0.createDevice(id: id, secretHash: hash, promise: promise) }
        return promise.futureResult.map { (id, secret) }
    }

    public func register(deviceID: String, secret: String, topic: String) -> EventLoopFuture<String> {
        onShard(of: deviceID, String.self) { shard, promise in
            shard.register(deviceID: deviceID, secret: secret, topic: topic, promise: promise)
        }
    }

    public func unregister(deviceID: String, secret: String, token: String) -> EventLoopFuture<Void> {
        onShard(of: deviceID, Void.self) { shard, promise in
            shard.unregister(deviceID: deviceID, secret: secret, token: token, promise: promise)
        }
    }

    /// A Web Push subscription of the device named `name` (a registration whose token ends its
    /// endpoint), restricted to `applicationServerKey` (an uncompressed P-256 point) when given:
    /// its token. The same name and key again get the same token.
    public func subscribe(
        deviceID: String,
        secret: String,
        name: String,
        applicationServerKey: [UInt8]?
    ) -> EventLoopFuture<String> {
        onShard(of: deviceID, String.self) { shard, promise in
            shard.register(
                deviceID: deviceID,
                secret: secret,
                topic: name,
                kind: .webpush,
                applicationServerKey: applicationServerKey,
                promise: promise
            )
        }
    }

    /// Deletes a Web Push subscription: its endpoint answers 410 from then on.
    public func unsubscribe(deviceID: String, secret: String, token: String) -> EventLoopFuture<Void> {
        onShard(of: deviceID, Void.self) { shard, promise in
            shard.unregister(deviceID: deviceID, secret: secret, token: token, kind: .webpush, promise: promise)
        }
    }

    public func deleteDevice(deviceID: String, secret: String) -> EventLoopFuture<Void> {
        onShard(of: deviceID, Void.self) { shard, promise in
            shard.deleteDevice(deviceID: deviceID, secret: secret, promise: promise)
        }
    }

    public func ack(deviceID: String, secret: String, upTo: UInt64) -> EventLoopFuture<Void> {
        onShard(of: deviceID, Void.self) { shard, promise in
            shard.ack(deviceID: deviceID, secret: secret, upTo: upTo, promise: promise)
        }
    }

    /// A keep-alive: a wake event. Succeeds, once on disk, with what the scheduler held for the
    /// device, now with seqs, in order: delivered by `keepalive`, in the keep-alive's response.
    public func keepalive(deviceID: String, secret: String) -> EventLoopFuture<[KeepaliveRelease]> {
        onShard(of: deviceID, [KeepaliveRelease].self) { shard, promise in
            shard.keepalive(deviceID: deviceID, secret: secret, promise: promise)
        }
    }

    /// The device's power state, its apps' states and their fetch intervals, as it reports them;
    /// succeeds, once on disk, with the states in force.
    public func setState(
        deviceID: String,
        secret: String,
        power: DevicePower?,
        apps: [(topic: String, state: AppState)],
        fetchIntervals: [(topic: String, interval: FetchInterval)] = []
    ) -> EventLoopFuture<AppliedState> {
        let apps = apps.map { AppStateReport(topic: $0.topic, state: $0.state) }
        let intervals = fetchIntervals.map { FetchIntervalReport(topic: $0.topic, interval: $0.interval) }
        return onShard(of: deviceID, AppliedState.self) { shard, promise in
            shard.setState(
                deviceID: deviceID,
                secret: secret,
                power: power,
                apps: apps.map { ($0.topic, $0.state) },
                fetchIntervals: intervals.map { ($0.topic, $0.interval) },
                promise: promise
            )
        }
    }

    /// Fetch results an agent reports for silent pushes it received: all count, once on disk,
    /// or none does (`BadFetchResult` names the first seq with no open window).
    public func reportFetchResults(
        deviceID: String,
        secret: String,
        results: [(seq: UInt64, result: FetchResult)]
    ) -> EventLoopFuture<Void> {
        let reports = results.map { FetchResultReport(seq: $0.seq, result: $0.result) }
        return onShard(of: deviceID, Void.self) { shard, promise in
            shard.reportFetchResults(
                deviceID: deviceID,
                secret: secret,
                results: reports.map { ($0.seq, $0.result) },
                promise: promise
            )
        }
    }

    /// Checks the device's secret (before an event stream's head is sent).
    public func authenticate(deviceID: String, secret: String) -> EventLoopFuture<Void> {
        onShard(of: deviceID, Void.self) { shard, promise in
            if shard.state.authenticate(deviceID: deviceID, secret: secret) != nil {
                promise.succeed()
            } else {
                promise.fail(Refusal.unauthorized)
            }
        }
    }

    /// Opens the device's event stream (ending any older one) before its head is sent, so that
    /// a push accepted once the agent sees the head finds the device connected. `lastEventID`
    /// acknowledges up to that seq first. Then `bindStream` with the stream's sink once the head
    /// is out; `closeStream` when the stream ends or its head could not be sent.
    public func openStream(deviceID: String, secret: String, lastEventID: UInt64?) -> EventLoopFuture<UInt64> {
        onShard(of: deviceID, UInt64.self) { shard, promise in
            shard.openStream(deviceID: deviceID, secret: secret, lastEventID: lastEventID, promise: promise)
        }
    }

    public func bindStream(deviceID: String, generation: UInt64, sink: any EventSink) {
        guard let shard = shard(of: deviceID) else { return }
        shard.execute { $0.bind(deviceID: deviceID, generation: generation, sink: sink) }
    }

    public func closeStream(deviceID: String, generation: UInt64) {
        guard let shard = shard(of: deviceID) else { return }
        shard.execute { $0.close(deviceID: deviceID, generation: generation) }
    }

    // MARK: Provider API

    /// Routes a validated push to its device: 200 dispositions, or the APNs refusal.
    public func accept(_ push: Push, expiration: Expiration) -> EventLoopFuture<Disposition> {
        guard let shard = shard(of: push.deviceToken) else {
            return shards[0].eventLoop.makeFailedFuture(
                Refusal.unknownDeviceToken(push.deviceToken)
            )
        }
        let promise = shard.eventLoop.makePromise(of: Disposition.self)
        // A task even when the shard shares the connection's loop: the pushes of one read then
        // reach the store together, after the read, and share commits. Run at once instead, each
        // would wake the writer while the rest of the read was still being parsed.
        shard.execute { $0.accept(push, expiration: expiration, promise: promise) }
        return promise.futureResult
    }

    /// Routes a Web Push message to its endpoint's subscription: what its 201 says, or the
    /// refusal, in the contract's order (`ShardState.accept(_:)` of a submission).
    public func acceptWebPush(_ submission: WebPushSubmission) -> EventLoopFuture<WebPushAcceptance> {
        guard let shard = shard(of: submission.token) else {
            return shards[0].eventLoop.makeFailedFuture(Refusal(.notFound, "no subscription has this endpoint"))
        }
        let promise = shard.eventLoop.makePromise(of: Disposition.self)
        shard.execute { $0.accept(submission, promise: promise) }
        let (messageID, ttl) = ((try? submission.message.get()).map { ($0.push.apnsID, $0.ttlSeconds) }) ?? ("", 0)
        return promise.futureResult.map { WebPushAcceptance(messageID: messageID, ttlSeconds: ttl, disposition: $0) }
    }

    // MARK: Routing

    private func shardIndex(of hexID: String) -> Int? {
        Identifiers.virtualShard(ofHex: hexID).map { $0 % shards.count }
    }

    func shard(of hexID: String) -> ShardHandle? {
        shardIndex(of: hexID).map { shards[$0] }
    }

    private func onShard<T: Sendable>(
        of deviceID: String,
        _ type: T.Type,
        _ body: @escaping @Sendable (DeviceShard, EventLoopPromise<T>) -> Void
    ) -> EventLoopFuture<T> {
        guard Identifiers.isDeviceID(deviceID), let shard = shard(of: deviceID) else {
            return shards[0].eventLoop.makeFailedFuture(Refusal.unauthorized)
        }
        let promise = shard.eventLoop.makePromise(of: T.self)
        shard.execute { body($0, promise) }
        return promise.futureResult
    }
}

/// Acceptance order across all shards: one atomic increment per push.
final class AcceptanceIDs: Sendable {
    private let last = Atomic<UInt64>(0)

    func next() -> UInt64 { last.add(1, ordering: .relaxed).newValue }

    func `continue`(after value: UInt64) { last.store(value, ordering: .relaxed) }
}

/// A notification a keep-alive released, with its fetch window in seconds when it is silent
/// (the window its shard opened for it, under the policy then in force).
public struct KeepaliveRelease: Sendable {
    public var notification: AcceptedPush
    public var fetchWindowSeconds: Int?

    public init(notification: AcceptedPush, fetchWindowSeconds: Int?) {
        self.notification = notification
        self.fetchWindowSeconds = fetchWindowSeconds
    }
}

/// What is in force after a device's state report: its power state (the last it reported, or
/// `awake`) and each app it reported, with why when its state is not the one reported.
public struct AppliedState: Sendable, Equatable {
    public struct App: Sendable, Equatable {
        public var topic: String
        public var reported: AppState
        /// In force now.
        public var state: AppState

        public init(topic: String, reported: AppState, state: AppState) {
            self.topic = topic
            self.reported = reported
            self.state = state
        }

        /// Why `state` is not `reported`, in words; nil when they agree. The one such rule: an
        /// app reported terminated stays so until it reports foreground.
        public var reason: String? {
            guard state != reported else { return nil }
            return
                "the app was reported terminated: it stays terminated, and its silent pushes are discarded, until it reports foreground (as iOS keeps a force-quit app from background launches until the user opens it)"
        }
    }

    public var power: DevicePower
    public var apps: [App]

    public init(power: DevicePower, apps: [App]) {
        self.power = power
        self.apps = apps
    }
}

/// One app's reported state, as it crosses to the device's shard.
private struct AppStateReport: Sendable {
    var topic: String
    var state: AppState
}

private struct FetchIntervalReport: Sendable {
    var topic: String
    var interval: FetchInterval
}

private struct FetchResultReport: Sendable {
    var seq: UInt64
    var result: FetchResult
}

/// A gateway node's ownership of a device, when several nodes share the database: the lease it
/// holds (`PushgateCluster.NodeLease`) and the epoch of its claim. Every commit that changes
/// the device carries it, and the database refuses one whose device has moved on (fencing).
public struct DeviceOwner: Sendable, Hashable {
    public var lease: UInt64
    public var epoch: UInt64

    public init(lease: UInt64, epoch: UInt64) {
        self.lease = lease
        self.epoch = epoch
    }
}

/// Where a node sends the pushes its routes have read: its own delivery core on a gateway alone,
/// or the cluster layer, which hands each to its device's owner.
public protocol PushAcceptor: Sendable {
    /// A provider push, answered with its disposition once committed (or a refusal).
    func accept(_ push: Push, expiration: Expiration) -> EventLoopFuture<Disposition>
    /// A Web Push message, answered as `accept` answers.
    func acceptWebPush(_ submission: WebPushSubmission) -> EventLoopFuture<WebPushAcceptance>
}

extension DeliveryCore: PushAcceptor {}

/// Where a node hears of devices its shards let go because the store refused a commit for them
/// (another node owns them now): the cluster layer forgets them too.
public final class DeviceReleases: Sendable {
    private let handler = NIOLockedValueBox<(@Sendable (String) -> Void)?>(nil)

    public init() {}

    /// `handler` is called on the device's shard loop, for each device let go.
    public func observe(_ handler: @escaping @Sendable (String) -> Void) {
        self.handler.withLockedValue { $0 = handler }
    }

    func released(_ deviceID: String) {
        handler.withLockedValue { $0 }?(deviceID)
    }
}
