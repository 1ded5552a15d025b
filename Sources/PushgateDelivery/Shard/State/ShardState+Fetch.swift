import NIOCore
import PushgateModel
import PushgateScheduler
import PushgateStore

// Background fetch: the windows delivered silent pushes open, the results agents report, the
// timeouts of windows that end without one, and the figures each registration keeps.
extension ShardState {
    /// Opens the fetch window of each silent push just written to its device for the first
    /// time; returns the command recording the windows (a restart keeps their remaining time),
    /// which rides on the next group commit: nothing waits for it.
    func openFetchWindows(_ written: [QueuedNotification], on device: DeviceState, now: Int64) -> [StoreCommand] {
        var records: [FetchWindowRecord] = []
        for entry in written where !entry.windowOpened && entry.record.push.pushClass == .silent {
            entry.windowOpened = true
            let record = entry.record
            guard let seq = record.seq, let app = registrations[record.push.deviceToken]?.app else { continue }
            if scheduler.openFetchWindow(app: app, seq: seq, now: now) {
                records.append(
                    FetchWindowRecord(deviceID: device.id, seq: seq, token: record.push.deviceToken, openedAt: now)
                )
            } else if scheduler.openFetchWindows(device: device.handle).count >= Scheduler.openWindowsPerDevice {
                counters.recordFetchWindowOverflow()
            }
        }
        return records.isEmpty ? [] : [.openFetchWindows(records)]
    }

    /// Fetch results an agent reports. All or nothing: every seq must have an open window (and
    /// appear once); otherwise nothing counts and the refusal names the first seq that failed
    /// and why. Returns the commands that record them: they are committed first and applied
    /// (`applyFetchResults`) once on disk, so a failed commit leaves nothing counted, and the
    /// agent may report again.
    func fetchResultCommands(
        _ results: [(seq: UInt64, result: FetchResult)],
        of device: DeviceState
    ) -> Result<[StoreCommand], Refusal> {
        let now = clock.nowMillis()
        var seen = Set<UInt64>()
        var predicted: [AppHandle: FetchSnapshot] = [:]
        for (seq, result) in results {
            guard seen.insert(seq).inserted else {
                return .failure(Refusal(.badFetchResult, "seq \(seq) appears twice in the results; report each once"))
            }
            switch fetchResultCheck(seq: seq, device: device, now: now) {
            case .failure(let refusal):
                return .failure(refusal)
            case .success(let app):
                var snapshot = predicted[app] ?? scheduler.fetchSnapshot(app: app) ?? FetchSnapshot()
                snapshot.history.record(result)
                predicted[app] = snapshot
            }
        }
        guard !results.isEmpty else { return .success([]) }
        var states: [FetchStateRecord] = []
        for (app, snapshot) in predicted {
            if let token = appTokens[app] { states.append(Self.record(token: token, snapshot)) }
        }
        var commands = closing(results.map(\.seq), on: device)
        commands.append(.saveFetchStates(states.sorted { $0.token < $1.token }))
        return .success(commands)
    }

    /// The results are on disk: they count now.
    func applyFetchResults(_ results: [(seq: UInt64, result: FetchResult)], of device: DeviceState) {
        let now = clock.nowMillis()
        for (seq, result) in results {
            // A window that ended while the commit ran has timed out here meanwhile; the disk
            // then holds the report and memory the timeout, until the app's next save.
            if case .open = scheduler.reportFetchResult(device: device.handle, seq: seq, result: result, now: now) {
                counters.fetchResults.add(result)
            }
        }
    }

    private static func record(token: String, _ snapshot: FetchSnapshot) -> FetchStateRecord {
        FetchStateRecord(
            token: token,
            results: snapshot.history.packed,
            resultCount: Int(snapshot.history.count),
            penaltyUntil: snapshot.penaltyUntil,
            interval: snapshot.interval,
            lastBudgetAt: snapshot.lastBudgetAt
        )
    }

    /// The app a result for `seq` counts for, or why it cannot count. A window past its end
    /// whose timer has not run yet (a busy loop) is already over.
    private func fetchResultCheck(seq: UInt64, device: DeviceState, now: Int64) -> Result<AppHandle, Refusal> {
        switch scheduler.fetchWindow(device: device.handle, seq: seq) {
        case .open(let app, let until) where until > now:
            return .success(app)
        case .open(_, let until), .timedOut(let until):
            return .failure(
                Refusal(
                    .badFetchResult,
                    "the fetch window of seq \(seq) ended at \(until) (milliseconds since the epoch) without a report and counted as a timeout; report within fetchWindowSeconds of receiving the push"
                )
            )
        case .reported(let result):
            return .failure(
                Refusal(
                    .badFetchResult,
                    "the result of seq \(seq) was already reported (\(result.rawValue)); report each once"
                )
            )
        case .none:
            if seq == 0 || seq >= device.nextSeq {
                return .failure(Refusal(.badFetchResult, "seq \(seq) was never sent to this device"))
            }
            if let queued = device.queue.first(where: { $0.seq == seq }),
                queued.record.push.pushClass != .silent
            {
                return .failure(
                    Refusal(
                        .badFetchResult,
                        "seq \(seq) is not a silent push (its push type is \(queued.record.push.pushType.rawValue)): only silent (background) pushes open a fetch window"
                    )
                )
            }
            return .failure(
                Refusal(
                    .badFetchResult,
                    "seq \(seq) has no fetch window: it was not a silent push, or its window closed long ago"
                )
            )
        }
    }

    /// Windows that ended with no report: closed on disk, counted as timeouts.
    func closeTimedOut(_ timeouts: [FetchTimeout], into plan: inout ShardPlan) {
        guard !timeouts.isEmpty else { return }
        var seqsByDevice: [String: [UInt64]] = [:]
        for timeout in timeouts {
            counters.fetchResults.add(.timeout)
            guard let deviceID = deviceIDs[timeout.device] else { continue }
            seqsByDevice[deviceID, default: []].append(timeout.seq)
        }
        for (deviceID, seqs) in seqsByDevice.sorted(by: { $0.key < $1.key }) {
            guard let device = devices[deviceID] else { continue }
            plan.commands += closing(seqs, on: device)
        }
    }

    /// Closing windows on disk: marked closed while their pushes are still queued (written
    /// again after a restart, they must open none), deleted once acknowledged.
    private func closing(_ seqs: [UInt64], on device: DeviceState) -> [StoreCommand] {
        var queued: [UInt64] = []
        var acknowledged: [UInt64] = []
        for seq in seqs {
            if device.queue.contains(where: { $0.seq == seq }) { queued.append(seq) } else { acknowledged.append(seq) }
        }
        var commands: [StoreCommand] = []
        if !queued.isEmpty { commands.append(.closeFetchWindows(deviceID: device.id, seqs: queued)) }
        if !acknowledged.isEmpty { commands.append(.forgetFetchWindows(deviceID: device.id, seqs: acknowledged)) }
        return commands
    }

    /// The fetch figures the scheduler changed, for the same commit as the change.
    func fetchStateCommand() -> StoreCommand? {
        let dirty = scheduler.drainDirtyFetchStates()
        guard !dirty.isEmpty else { return nil }
        var records: [FetchStateRecord] = []
        records.reserveCapacity(dirty.count)
        for (app, snapshot) in dirty {
            guard let token = appTokens[app] else { continue }
            records.append(Self.record(token: token, snapshot))
        }
        return records.isEmpty ? nil : .saveFetchStates(records)
    }

    // MARK: Restoring

    func load(fetchStates records: [FetchStateRecord]) {
        for record in records {
            guard let app = registrations[record.token]?.app,
                let history = FetchHistory(packed: record.results, count: record.resultCount)
            else { continue }
            scheduler.restoreFetchState(
                app: app,
                FetchSnapshot(
                    history: history,
                    penaltyUntil: record.penaltyUntil,
                    interval: record.interval,
                    lastBudgetAt: record.lastBudgetAt
                )
            )
        }
        _ = scheduler.drainDirtyFetchStates()
    }

    /// The windows at the last stop: open ones (acknowledged or not) and closed ones of pushes
    /// still queued, which open no new window when written again. Open ones that ended
    /// meanwhile time out at the first `advance` (from their end); the others keep the rest of
    /// their time. Closed rows of pushes no longer queued are forgotten. Call after the
    /// notifications. Returns the commands that forget the windows no push needs.
    func load(fetchWindows records: [FetchWindowRecord]) -> [StoreCommand] {
        var orphans: [String: [UInt64]] = [:]
        for record in records {
            let entry = devices[record.deviceID]?.queue.first { $0.seq == record.seq }
            entry?.windowOpened = true
            if record.closed {
                if entry == nil { orphans[record.deviceID, default: []].append(record.seq) }
                continue
            }
            guard let app = registrations[record.token]?.app,
                scheduler.restoreFetchWindow(app: app, seq: record.seq, openedAt: record.openedAt)
            else {
                orphans[record.deviceID, default: []].append(record.seq)
                continue
            }
        }
        return orphans.sorted { $0.key < $1.key }.map {
            StoreCommand.forgetFetchWindows(deviceID: $0.key, seqs: $0.value)
        }
    }
}
