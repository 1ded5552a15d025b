import NIOCore
import PushgateModel
import PushgateScheduler
import PushgateStore

// Background fetch: the windows delivered silent pushes open, the results agents report, the
// timeouts of windows that end without one, and the figures each registration keeps.
extension DeviceShard {
    /// How long the app of a silent push has to report its fetch result; nil for other pushes.
    func fetchWindowSeconds(of record: AcceptedPush) -> Int? {
        guard record.push.pushType.pushClass == .silent else { return nil }
        return Int(configuration.scheduler.policy(forTopic: record.push.topic).fetchWindowMillis / 1000)
    }

    /// Opens the fetch window of each silent push just written to its device for the first
    /// time, and records the windows (a restart keeps their remaining time). The store command
    /// rides on the next group commit; nothing waits for it.
    func openFetchWindows(_ written: [AcceptedPush], on device: DeviceState, now: Int64) {
        var records: [FetchWindowRecord] = []
        for record in written where record.push.pushType.pushClass == .silent {
            guard let seq = record.seq, let app = registrations[record.push.deviceToken]?.app else { continue }
            if scheduler.openFetchWindow(app: app, seq: seq, now: now) {
                records.append(FetchWindowRecord(deviceID: device.id, seq: seq, token: record.push.deviceToken, openedAt: now))
            } else {
                counters.recordFetchWindowOverflow()
            }
        }
        guard !records.isEmpty else { return }
        armSchedulerTimer()
        commit([.openFetchWindows(records)]) { _ in }
    }

    /// Fetch results an agent reports. All or nothing: every seq must have an open window (and
    /// appear once); otherwise nothing counts and the refusal names the first seq that failed
    /// and why. Succeeds once the results are on disk.
    func reportFetchResults(
        deviceID: String,
        secret: String,
        results: [(seq: UInt64, result: FetchResult)],
        promise: EventLoopPromise<Void>
    ) {
        guard let device = authenticate(deviceID: deviceID, secret: secret) else {
            promise.fail(Refusal.unauthorized)
            return
        }
        var seen = Set<UInt64>()
        for (seq, _) in results {
            guard seen.insert(seq).inserted else {
                promise.fail(Refusal(.badFetchResult, "seq \(seq) appears twice in the results; report each once"))
                return
            }
            if let refusal = fetchResultRefusal(seq: seq, device: device) {
                promise.fail(refusal)
                return
            }
        }
        let now = clock.nowMillis()
        for (seq, result) in results {
            scheduler.reportFetchResult(device: device.handle, seq: seq, result: result, now: now)
            counters.fetchResults.add(result)
        }
        var commands: [StoreCommand] = []
        if !results.isEmpty { commands.append(.closeFetchWindows(deviceID: deviceID, seqs: results.map(\.seq))) }
        finish(commands, entries: []) { result in
            promise.completeWith(result.mapError { Refusal.storeFailed($0) as any Error })
        }
    }

    /// Why a result for `seq` cannot count; nil when its window is open.
    private func fetchResultRefusal(seq: UInt64, device: DeviceState) -> Refusal? {
        switch scheduler.fetchWindow(device: device.handle, seq: seq) {
        case .open:
            return nil
        case .reported(let result):
            return Refusal(.badFetchResult, "the result of seq \(seq) was already reported (\(result.rawValue)); report each once")
        case .timedOut(let at):
            return Refusal(
                .badFetchResult,
                "the fetch window of seq \(seq) ended at \(at) (milliseconds since the epoch) without a report and counted as a timeout; report within fetchWindowSeconds of receiving the push"
            )
        case .none:
            if seq == 0 || seq >= device.nextSeq {
                return Refusal(.badFetchResult, "seq \(seq) was never sent to this device")
            }
            if let queued = device.queue.first(where: { $0.seq == seq }), queued.record.push.pushType.pushClass != .silent {
                return Refusal(
                    .badFetchResult,
                    "seq \(seq) is a \(queued.record.push.pushType.rawValue) push: only silent (background) pushes open a fetch window"
                )
            }
            return Refusal(
                .badFetchResult,
                "seq \(seq) has no fetch window: it was not a silent push, or its window closed long ago"
            )
        }
    }

    /// Windows that ended with no report: forgotten on disk, counted as timeouts.
    func forget(_ timeouts: [FetchTimeout], into commands: inout [StoreCommand]) {
        guard !timeouts.isEmpty else { return }
        var seqsByDevice: [String: [UInt64]] = [:]
        for timeout in timeouts {
            counters.fetchResults.add(.timeout)
            guard let deviceID = deviceIDs[timeout.device] else { continue }
            seqsByDevice[deviceID, default: []].append(timeout.seq)
        }
        for (deviceID, seqs) in seqsByDevice.sorted(by: { $0.key < $1.key }) {
            commands.append(.closeFetchWindows(deviceID: deviceID, seqs: seqs))
        }
    }

    /// The fetch figures the scheduler changed, for the same commit as the change.
    func fetchStateCommand() -> StoreCommand? {
        let dirty = scheduler.drainDirtyFetchStates()
        guard !dirty.isEmpty else { return nil }
        var records: [FetchStateRecord] = []
        records.reserveCapacity(dirty.count)
        for (app, snapshot) in dirty {
            guard let token = appTokens[app] else { continue }
            records.append(FetchStateRecord(
                token: token,
                results: snapshot.history.packed,
                resultCount: Int(snapshot.history.count),
                penaltyUntil: snapshot.penaltyUntil,
                interval: snapshot.interval,
                lastBudgetAt: snapshot.lastBudgetAt
            ))
        }
        return records.isEmpty ? nil : .saveFetchStates(records)
    }

    // MARK: Restoring

    func load(fetchStates records: [FetchStateRecord]) {
        for record in records {
            guard let app = registrations[record.token]?.app, let history = FetchHistory(packed: record.results, count: record.resultCount)
            else { continue }
            scheduler.restoreFetchState(
                app: app,
                FetchSnapshot(history: history, penaltyUntil: record.penaltyUntil, interval: record.interval, lastBudgetAt: record.lastBudgetAt)
            )
        }
        _ = scheduler.drainDirtyFetchStates()
    }

    /// Windows still open at the last stop. Those that ended meanwhile time out at the first
    /// `advance` (from their end); the others keep the rest of their time.
    func load(fetchWindows records: [FetchWindowRecord]) {
        var orphans: [String: [UInt64]] = [:]
        for record in records {
            guard let app = registrations[record.token]?.app,
                  scheduler.restoreFetchWindow(app: app, seq: record.seq, openedAt: record.openedAt)
            else {
                orphans[record.deviceID, default: []].append(record.seq)
                continue
            }
        }
        let commands = orphans.sorted { $0.key < $1.key }.map { StoreCommand.closeFetchWindows(deviceID: $0.key, seqs: $0.value) }
        if !commands.isEmpty { commit(commands) { _ in } }
    }
}
