import NIOCore
import PushgateModel
import PushgateScheduler
import PushgateStore

// Requests of providers and agents: each planned by the state, carried out, then answered.
extension DeviceShard {
    func accept(_ push: Push, expiration: Expiration, promise: EventLoopPromise<Disposition>) {
        carryOut(state.accept(push, expiration: expiration), promise: promise)
    }

    /// A Web Push message to one of the shard's endpoints.
    func accept(_ submission: WebPushSubmission, promise: EventLoopPromise<Disposition>) {
        carryOut(state.accept(submission), promise: promise)
    }

    private func carryOut(_ decision: AcceptanceDecision, promise: EventLoopPromise<Disposition>) {
        switch decision {
        case .refused(let refusal):
            promise.fail(refusal)
        case .answered(let disposition, let plan):
            state.counters.recordDisposition(disposition)
            promise.succeed(disposition)
            carryOut(plan)
        case .planned(let acceptance):
            carryOut(acceptance, promise: promise)
        }
    }

    /// A wake event: what the scheduler held for the device goes in the response (and is acked
    /// like any other notification). Succeeds, once on disk, with the released notifications,
    /// with their seqs, in order; they came by `keepalive`.
    func keepalive(deviceID: String, secret: String, promise: EventLoopPromise<[KeepaliveRelease]>) {
        guard let device = state.authenticate(deviceID: deviceID, secret: secret) else {
            promise.fail(Refusal.unauthorized)
            return
        }
        let (plan, released) = state.keepalive(device)
        carryOut(plan) { [self] result in
            switch result {
            case .success:
                record(state.confirmKeepalive(released, on: device))
                armSchedulerTimer()
                let policy = state.scheduler.configuration
                promise.succeed(
                    released.map {
                        KeepaliveRelease(notification: $0, fetchWindowSeconds: policy.fetchWindowSeconds(of: $0))
                    }
                )
            case .failure(let error):
                promise.fail(error.refusal)
            }
        }
    }

    /// Power and app states and fetch intervals the device reports. Topics must be registered
    /// on the device.
    func setState(
        deviceID: String,
        secret: String,
        power: DevicePower?,
        apps: [(topic: String, state: AppState)],
        fetchIntervals: [(topic: String, interval: FetchInterval)] = [],
        promise: EventLoopPromise<AppliedState>
    ) {
        guard let device = state.authenticate(deviceID: deviceID, secret: secret) else {
            promise.fail(Refusal.unauthorized)
            return
        }
        switch state.setState(of: device, power: power, apps: apps, fetchIntervals: fetchIntervals) {
        case .failure(let refusal):
            promise.fail(refusal)
        case .success(let (plan, applied)):
            carryOut(plan) { result in
                promise.completeWith(result.map { applied }.mapError { $0.refusal as any Error })
            }
        }
    }

    /// Fetch results an agent reports: committed first, then counted (see
    /// `ShardState.fetchResultCommands`).
    func reportFetchResults(
        deviceID: String,
        secret: String,
        results: [(seq: UInt64, result: FetchResult)],
        promise: EventLoopPromise<Void>
    ) {
        guard let device = state.authenticate(deviceID: deviceID, secret: secret) else {
            promise.fail(Refusal.unauthorized)
            return
        }
        let commands: [StoreCommand]
        switch state.fetchResultCommands(results, of: device) {
        case .failure(let refusal):
            promise.fail(refusal)
            return
        case .success(let recorded):
            commands = recorded
        }
        guard !commands.isEmpty else {
            promise.succeed()
            return
        }
        commit(commands) { [self] outcome in
            switch outcome {
            case .success:
                state.applyFetchResults(results, of: device)
                // The refill the results changed (the bucket, brought up to now first).
                carryOut(ShardPlan())
                promise.succeed()
            case .failure(let error):
                promise.fail(error.refusal)
            }
        }
    }

    // MARK: Devices and registrations

    func createDevice(id: String, secretHash: [UInt8], promise: EventLoopPromise<Void>) {
        carryOut(state.createDevice(id: id, secretHash: secretHash)) { [state] result in
            if case .success = result { state.logDevice("device created", id) }
            promise.completeWith(result.mapError { $0.refusal as any Error })
        }
    }

    /// A registration: an APNs app (`topic`), or a Web Push subscription (`topic` its name),
    /// restricted to `applicationServerKey` when given. The same one again gets the same token;
    /// the name of one of another kind or key is a conflict.
    func register(
        deviceID: String,
        secret: String,
        topic: String,
        kind: RegistrationKind = .apns,
        applicationServerKey: [UInt8]? = nil,
        promise: EventLoopPromise<String>
    ) {
        guard let device = state.authenticate(deviceID: deviceID, secret: secret) else {
            promise.fail(Refusal.unauthorized)
            return
        }
        if let token = device.tokensByTopic[topic] {
            if let existing = state.registrations[token],
                let conflict = Self.conflict(existing, topic, kind: kind, applicationServerKey: applicationServerKey)
            {
                promise.fail(conflict)
                return
            }
            if let committing = state.registrations[token]?.committing {
                promise.completeWith(committing)
            } else {
                promise.succeed(token)
            }
            return
        }
        guard device.tokensByTopic.count < configuration.maxRegistrationsPerDevice else {
            promise.fail(
                Refusal(
                    .tooManyRegistrations,
                    "the device has \(device.tokensByTopic.count) registrations, the most it may have (maxRegistrationsPerDevice); unregister an app before registering another"
                )
            )
            return
        }
        let token: String
        do {
            token = try Identifiers.newToken(forDevice: deviceID)
        } catch {
            promise.fail(Refusal(.internalServerError, "\(error)"))
            return
        }
        let plan = state.register(
            topic,
            token: token,
            on: device,
            kind: kind,
            applicationServerKey: applicationServerKey
        )
        // Further registrations of the topic complete with this one, so that no caller gets a
        // token before it is on disk.
        state.registrations[token]?.committing = promise.futureResult
        carryOut(plan) { [state] result in
            switch result {
            case .success:
                state.registrations[token]?.committing = nil
                state.logDevice("app registered", deviceID, ["topic": "\(topic)"])
                promise.succeed(token)
            case .failure(let error):
                promise.fail(error.refusal)
            }
        }
    }

    /// Why registering `topic` as `kind` (with `applicationServerKey`) conflicts with the
    /// device's active registration of that name, if it does.
    private static func conflict(
        _ existing: RegistrationState,
        _ topic: String,
        kind: RegistrationKind,
        applicationServerKey: [UInt8]?
    ) -> Refusal? {
        if existing.kind != kind {
            let other = existing.kind == .apns ? "an APNs registration" : "a Web Push subscription"
            return Refusal(
                .subscriptionConflict,
                "the device has \(other) named \(topic); a device's registrations and subscriptions each need a name of their own"
            )
        }
        guard existing.applicationServerKey != applicationServerKey else { return nil }
        return Refusal(
            .subscriptionConflict,
            "the subscription \(topic) exists \(existing.applicationServerKey == nil ? "unrestricted" : "restricted to another application server key"); delete it and subscribe again to change its key (RFC 8292 section 4)"
        )
    }

    func unregister(
        deviceID: String,
        secret: String,
        token: String,
        kind: RegistrationKind = .apns,
        promise: EventLoopPromise<Void>
    ) {
        guard let device = state.authenticate(deviceID: deviceID, secret: secret) else {
            promise.fail(Refusal.unauthorized)
            return
        }
        guard let registration = state.registrations[token], registration.deviceID == deviceID,
            registration.unregisteredAt == nil, registration.kind == kind
        else {
            let what = kind == .apns ? "registration" : "subscription"
            promise.fail(Refusal(.notFound, "no active \(what) \(token) on this device"))
            return
        }
        carryOut(state.unregister(token, registration, of: device)) { [state, topic = registration.topic] result in
            if case .success = result { state.logDevice("app unregistered", deviceID, ["topic": "\(topic)"]) }
            promise.completeWith(result.mapError { $0.refusal as any Error })
        }
    }

    func deleteDevice(deviceID: String, secret: String, promise: EventLoopPromise<Void>) {
        guard let device = state.authenticate(deviceID: deviceID, secret: secret) else {
            promise.fail(Refusal.unauthorized)
            return
        }
        // Ended, and let go: the stream holds its connection, which nothing of a deleted
        // device should keep.
        device.stream?.sink?.finish()
        let plan = state.deleteDevice(device)
        let removed = plan.commands.reduce(0) { count, command in
            if case .deleteDevice(_, _, let acceptanceIDs) = command { count + acceptanceIDs.count } else { count }
        }
        carryOut(plan) { [state] result in
            if case .success = result {
                state.logDevice("device deleted", deviceID, ["notifications.removed": "\(removed)"])
            }
            promise.completeWith(result.mapError { $0.refusal as any Error })
        }
    }
}
