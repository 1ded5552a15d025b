import Logging
import NIOCore
import PushgateModel
import PushgateScheduler
import PushgateStore

/// One shard's devices at work: their state (`ShardState`), confined to one event loop, and what
/// touches the world: the store, the event streams, the timers.
///
/// Every method runs on `eventLoop`; the core routes each request here by the shard byte of the
/// device id or token, so no lock is taken on the delivery path. Each request is planned by the
/// state (applied to memory at once, so the next request sees it), carried out here (committed
/// to the store), and answered (to the provider or agent) only when the commit completes; a
/// failed commit is restored. `carryOut` is the one way a plan reaches the store.
final class DeviceShard {
    let eventLoop: any EventLoop
    let store: any NotificationStore
    let state: ShardState
    var clock: any DeliveryClock { state.clock }
    var configuration: DeliveryConfiguration { state.configuration }
    var logger: Logger { state.logger }
    /// Store completions come back through it, many per loop task.
    let completions: LoopInbox
    /// Told of devices let go because the store fenced a commit.
    let releases: DeviceReleases
    /// Every open stream, by when it may need a heartbeat (`heartbeat()`): its device and its
    /// generation, not the stream itself, which holds its connection (and through it this shard)
    /// until a later tick would drop it.
    var heartbeats: HeartbeatWheel<(device: DeviceState, generation: UInt64)>
    var streamGenerations: UInt64 = 0
    /// The one timer of the shard's scheduler, armed for its next deadline.
    var schedulerTimer: Scheduled<Void>?
    var schedulerTimerAt: Int64 = .max
    /// Set as the gateway stops: no scheduler timer is armed again, so none fires after the
    /// store has closed (its commit would fail and be logged as an error).
    var schedulerStopped = false

    init(
        eventLoop: any EventLoop,
        store: any NotificationStore,
        state: ShardState,
        releases: DeviceReleases
    ) {
        self.eventLoop = eventLoop
        self.store = store
        self.state = state
        self.releases = releases
        self.completions = LoopInbox(loop: eventLoop)
        heartbeats = HeartbeatWheel(
            tickMillis: state.configuration.heartbeatTickMillis,
            horizonMillis: state.configuration.heartbeatIntervalMillis,
            nowMillis: state.clock.nowMillis()
        )
    }

    // MARK: Carrying plans out

    /// Seals the plan (the scheduler's changed figures ride along), arms the scheduler's timer
    /// for what the plan changed, commits, then, back on this loop, confirms the plan and writes
    /// its new entries to their streams, or restores it; `then` gets the result after either.
    func carryOut(
        _ plan: ShardPlan,
        urgency: CommitUrgency = .prompt,
        then: @escaping (Result<Void, StoreError>) -> Void = { _ in }
    ) {
        carryOut(plan, urgency: urgency, followUp: .then(then))
    }

    /// A provider push's plan: confirmed, it has more to do (`ShardState.confirm(_:)` of an
    /// acceptance); then `promise` has the push's disposition, or the error that kept it off disk.
    func carryOut(_ acceptance: AcceptancePlan, promise: EventLoopPromise<Disposition>) {
        carryOut(acceptance.plan, urgency: .prompt, followUp: .acceptance(acceptance, promise))
    }

    /// What a plan's commit is followed by, back on this loop. A provider push's is a case of its
    /// own rather than closures, as it comes with every push.
    private enum FollowUp {
        case then((Result<Void, StoreError>) -> Void)
        case acceptance(AcceptancePlan, EventLoopPromise<Disposition>)

        func finish(_ result: Result<Void, StoreError>) {
            switch (self, result) {
            case (.then(let then), _): then(result)
            case (.acceptance(let acceptance, let promise), .success): promise.succeed(acceptance.disposition)
            case (.acceptance(_, let promise), .failure(let error)): promise.fail(error.notificationNotStored)
            }
        }
    }

    private func carryOut(_ plan: ShardPlan, urgency: CommitUrgency, followUp: FollowUp) {
        var plan = plan
        state.seal(&plan)
        armSchedulerTimer()
        guard !plan.commands.isEmpty else {
            followUp.finish(.success(()))
            return
        }
        commit(plan.commands, urgency: urgency) { [self] result in
            switch result {
            case .success:
                let confirmed =
                    switch followUp {
                    case .then: state.confirm(plan)
                    case .acceptance(let acceptance, _): state.confirm(acceptance)
                    }
                // Once all are marked, so that a device's entries go out in one write.
                for device in confirmed { pump(device) }
            case .failure(let error):
                state.restore(plan)
                // Another node owns one of the plan's devices now: what is held here of them is
                // stale, and their owner serves them from the store.
                if error.kind == .fenced {
                    for case .fence(let id, _, _) in plan.commands { release(id, fenced: true) }
                }
                armSchedulerTimer()
            }
            followUp.finish(result)
        }
    }

    /// Commits, then runs `then` back on this shard's loop. A failure is logged here once (but
    /// a storage fault, which the store logs as it begins and ends).
    func commit(
        _ commands: [StoreCommand],
        urgency: CommitUrgency = .prompt,
        then: @escaping (Result<Void, StoreError>) -> Void
    ) {
        let continuation = NIOLoopBound(then, eventLoop: eventLoop)
        let logger = self.logger
        let completions = self.completions
        store.commit(commands, urgency: urgency) { result in
            // A storage fault is logged by the store's health when it begins and ends, not per request.
            if case .failure(let error) = result, error.kind != .unavailable {
                logger.error("store commit failed", metadata: Self.metadata(of: commands, failedWith: error))
            }
            completions.submit { continuation.value(result) }
        }
    }

    /// Commands with no plan around them (fetch windows, orphans found at start): nothing to
    /// confirm or restore, and nobody waits.
    func record(_ commands: [StoreCommand]) {
        guard !commands.isEmpty else { return }
        commit(commands) { _ in }
    }

    /// A failed commit's log metadata: the error, and the device and the push it changed when
    /// it changed one (a request's commit does); a count when it changed several.
    private static func metadata(of commands: [StoreCommand], failedWith error: StoreError) -> Logger.Metadata {
        var metadata: Logger.Metadata = ["error": "\(error)", "store.commands": "\(commands.count)"]
        let devices = Set(commands.compactMap(\.deviceID))
        if devices.count == 1, let device = devices.first {
            metadata[LogMetadataKey.device] = "\(device)"
        } else if devices.count > 1 {
            metadata["store.devices"] = "\(devices.count)"
        }
        let pushes = commands.compactMap(\.apnsID)
        if pushes.count == 1, let push = pushes.first {
            metadata[LogMetadataKey.apnsID] = "\(push)"
        } else if pushes.count > 1 {
            metadata["store.pushes"] = "\(pushes.count)"
        }
        return metadata
    }

    // MARK: Loading and moving devices

    /// Takes a device over from its records in the store, under `owner`.
    func adopt(_ snapshot: ShardSnapshot, owner: DeviceOwner) {
        record(state.adopt(snapshot, owner: owner))
        armSchedulerTimer()
    }

    /// Forgets a device another node owns now, and ends its stream (the agent reconnects, to
    /// its owner or through a node that finds it).
    /// `fenced`: the store refused a commit for it, which the cluster layer must hear of.
    func release(_ id: String, fenced: Bool = false) {
        guard let device = state.release(id) else { return }
        state.logDevice("device released to another node", id)
        device.stream?.sink?.finish()
        device.stream = nil
        armSchedulerTimer()
        if fenced { releases.released(id) }
    }

    /// The shard's part of the store, read at start.
    func load(_ snapshot: ShardSnapshot) {
        state.load(devices: snapshot.devices)
        state.load(registrations: snapshot.registrations)
        state.load(buckets: snapshot.buckets)
        state.load(fetchStates: snapshot.fetchStates)
        record(state.load(notifications: snapshot.notifications))
        record(state.load(fetchWindows: snapshot.fetchWindows))
        armSchedulerTimer()
    }
}

/// The records of one shard, as the store had them at start.
struct ShardSnapshot: Sendable {
    var devices: [DeviceRecord] = []
    var registrations: [RegistrationRecord] = []
    var buckets: [BucketRecord] = []
    var fetchStates: [FetchStateRecord] = []
    var notifications: [AcceptedPush] = []
    var fetchWindows: [FetchWindowRecord] = []
}
