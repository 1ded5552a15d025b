import PushgateModel

// Background fetch: the window a delivered silent push opens, the results apps report, the refill
// they earn (FetchHistory's rule), timeout penalties and fetch intervals.

/// A fetch window that ended with no report.
public struct FetchTimeout: Sendable, Hashable {
    public var device: DeviceHandle
    public var app: AppHandle
    public var seq: UInt64
    /// When the window ended: the timeout counts from then, however late `advance` saw it.
    public var at: Int64
}

/// What the scheduler knows of a seq's fetch window.
public enum FetchWindowState: Sendable, Hashable {
    /// Open: a result for it counts for `app`.
    case open(app: AppHandle, until: Int64)
    /// Already closed by a report.
    case reported(FetchResult)
    /// Ended at `at` with no report: counted as a timeout.
    case timedOut(at: Int64)
    /// No window the scheduler remembers: never opened (not a silent push, or not delivered), or
    /// closed long enough ago to be forgotten.
    case none
}

/// An app's fetch figures as stored: its results, penalty, interval and last budget release.
public struct FetchSnapshot: Sendable, Hashable {
    public var history: FetchHistory
    /// The end of the latest penalty (possibly past: compare it with the time); nil when none.
    public var penaltyUntil: Int64?
    public var interval: FetchInterval
    /// The last budget release, which an interval counts from; nil when none is known.
    public var lastBudgetAt: Int64?

    public init(
        history: FetchHistory = FetchHistory(),
        penaltyUntil: Int64? = nil,
        interval: FetchInterval = .minimum,
        lastBudgetAt: Int64? = nil
    ) {
        self.history = history
        self.penaltyUntil = penaltyUntil
        self.interval = interval
        self.lastBudgetAt = lastBudgetAt
    }
}

/// An app's fetch figures for the admin view.
public struct FetchFigures: Sendable, Hashable {
    public var snapshot: FetchSnapshot
    /// The refill in thousandths of a token per hour: as configured, and as the results make it
    /// now (penalty included).
    public var configuredRefillMilliPerHour: UInt64
    public var effectiveRefillMilliPerHour: UInt64
    /// The floor the results cannot push the refill below.
    public var minRefillMilliPerHour: UInt64
    /// When the fetch interval next allows a budget release (nil: any time; `.max`: never).
    public var intervalReadyAt: Int64?
}

extension Scheduler {
    /// Closed windows kept per device to answer a repeated report; open ones are limited by what
    /// can be delivered within a window, and capped here.
    static let closedWindowsPerDevice = 8
    public static let openWindowsPerDevice = 256

    // MARK: Windows

    /// Opens the fetch window of a silent push of `app` written to its device with `seq` at
    /// `now`. False for an unknown handle, or when the device already has
    /// `openWindowsPerDevice` open windows (the caller counts it; no timeout will be recorded).
    @discardableResult
    public func openFetchWindow(app: AppHandle, seq: UInt64, now: Int64) -> Bool {
        guard let a = index(of: app) else { return false }
        return openWindow(
            app: a,
            seq: seq,
            deadline: now.addingReportingOverflow(policy(ofApp: a).policy.fetchWindowMillis).partialValue
        )
    }

    /// Puts back a window opened at `openedAt` before a restart. One that ended while the
    /// gateway was down times out at the next `advance`, from its end; one still open keeps the
    /// rest of its time.
    @discardableResult
    public func restoreFetchWindow(app: AppHandle, seq: UInt64, openedAt: Int64) -> Bool {
        openFetchWindow(app: app, seq: seq, now: openedAt)
    }

    /// What the device's window for `seq` is.
    public func fetchWindow(device: DeviceHandle, seq: UInt64) -> FetchWindowState {
        guard let d = index(of: device), let w = window(device: d, seq: seq) else { return .none }
        let window = windows[w]
        switch window.outcome {
        case nil:
            guard apps[Int(window.app)].isLive, apps[Int(window.app)].generation == window.appGeneration else {
                return .none
            }
            return .open(app: appHandle(Int(window.app)), until: window.deadline)
        case .timeout: return .timedOut(at: window.deadline)
        case let reported?: return .reported(reported)
        }
    }

    /// Whether the device's window for `seq` is open (cheaper than `fetchWindow` for a yes/no).
    public func isFetchWindowOpen(device: DeviceHandle, seq: UInt64) -> Bool {
        if case .open = fetchWindow(device: device, seq: seq) { return true }
        return false
    }

    /// Counts `result` for the open window of `seq` and closes it. Returns the window's state
    /// before: `.open` when it was counted; anything else changed nothing. A reported `timeout`
    /// is taken as what it says (no penalty: the app reported in time).
    @discardableResult
    public func reportFetchResult(
        device: DeviceHandle,
        seq: UInt64,
        result: FetchResult,
        now: Int64
    ) -> FetchWindowState {
        let state = fetchWindow(device: device, seq: seq)
        guard case .open = state, let d = index(of: device), let w = window(device: d, seq: seq) else { return state }
        let app = Int(windows[w].app)
        close(window: w, outcome: result, device: d)
        record(result, app: app, at: now, penalize: false)
        return state
    }

    private func openWindow(app a: Int, seq: UInt64, deadline: Int64) -> Bool {
        let d = Int(apps[a].device)
        var open = 0
        var w = devices[d].firstWindow
        while w != noSlot {
            if windows[Int(w)].outcome == nil { open += 1 }
            if windows[Int(w)].seq == seq { return false }
            w = windows[Int(w)].next
        }
        guard open < Self.openWindowsPerDevice else { return false }
        let record = FetchWindowSlot(
            seq: seq,
            deadline: deadline,
            app: UInt32(a),
            appGeneration: apps[a].generation,
            device: UInt32(d),
            next: devices[d].firstWindow,
            generation: 0,
            outcome: nil,
            isLive: true
        )
        let slot: UInt32
        if let free = freeWindows.popLast() {
            slot = free
            let generation = windows[Int(slot)].generation
            windows[Int(slot)] = record
            windows[Int(slot)].generation = generation
        } else {
            slot = UInt32(windows.count)
            windows.append(record)
        }
        devices[d].firstWindow = slot
        schedule(Timer(.fetchWindow, slot: slot, generation: windows[Int(slot)].generation, at: deadline))
        return true
    }

    private func window(device d: Int, seq: UInt64) -> Int? {
        var w = devices[d].firstWindow
        while w != noSlot {
            if windows[Int(w)].seq == seq { return Int(w) }
            w = windows[Int(w)].next
        }
        return nil
    }

    /// Closes a window, then forgets the device's oldest closed ones past the number kept.
    private func close(window w: Int, outcome: FetchResult, device d: Int) {
        windows[w].outcome = outcome
        var closed = 0
        forgetWindows(device: d) { window in
            guard window.outcome != nil else { return false }
            closed += 1
            return closed > Self.closedWindowsPerDevice
        }
    }

    /// Frees the device's windows for which `forget` says so, walking newest first.
    func forgetWindows(device d: Int, where forget: (FetchWindowSlot) -> Bool) {
        var previous = noSlot
        var w = devices[d].firstWindow
        while w != noSlot {
            let next = windows[Int(w)].next
            if forget(windows[Int(w)]) {
                if previous == noSlot { devices[d].firstWindow = next } else { windows[Int(previous)].next = next }
                windows[Int(w)].isLive = false
                windows[Int(w)].generation &+= 1
                freeWindows.append(w)
            } else {
                previous = w
            }
            w = next
        }
    }

    /// A window's end with no report: a timeout for its app, counted from the window's end.
    func timeOut(window w: Int, into output: inout SchedulerOutput) {
        let window = windows[w]
        let d = Int(window.device)
        let a = Int(window.app)
        close(window: w, outcome: .timeout, device: d)
        guard apps[a].isLive, apps[a].generation == window.appGeneration else { return }
        record(.timeout, app: a, at: window.deadline, penalize: true)
        output.fetchTimeouts.append(
            FetchTimeout(device: deviceHandle(d), app: appHandle(a), seq: window.seq, at: window.deadline)
        )
    }

    // MARK: Results and refill

    /// Records a result at `time`: the bucket is first brought up to `time` at the old rate, so
    /// the new rate applies from then on only.
    private func record(_ result: FetchResult, app a: Int, at time: Int64, penalize: Bool) {
        settleBucket(app: a, at: time)
        apps[a].fetch.record(result)
        let penalty = policy(ofApp: a).policy.timeoutPenaltyMillis
        if penalize, penalty > 0 {
            let end = time.addingReportingOverflow(penalty).partialValue
            // No timer for its end: every reader compares it with the time it asks about, and
            // the bucket's level and next token already change rate at it.
            apps[a].penaltyUntil = max(apps[a].penaltyUntil, end)
        }
        markFetchDirty(a)
        rescheduleBudget(device: Int(apps[a].device))
    }

    /// Moves the app's bucket to its level at `time` (nothing when its time is already later).
    private func settleBucket(app a: Int, at time: Int64) {
        guard time > apps[a].bucketTime else { return }
        apps[a].bucketLevel = appLevel(a, now: time)
        apps[a].bucketTime = time
        markBucketDirty(app: a)
    }

    /// The app's refill at `time`, in thousandths of a token per hour: the configured refill
    /// times the score, halved while a penalty runs, between the floor and the configured refill.
    func appRate(_ a: Int, at time: Int64) -> UInt64 {
        let policy = policy(ofApp: a)
        var rate = apps[a].fetch.scaled(policy.appRate)
        if apps[a].penaltyUntil > time { rate /= 2 }
        return min(policy.appRate, max(policy.minAppRate, rate))
    }

    /// When the app's bucket holds a whole token, counting from `now`, at the penalty's rate up
    /// to its end and the app's own after it.
    func appTokenTime(_ a: Int, now: Int64) -> Int64 {
        let time = max(now, apps[a].bucketTime)
        let level = appLevel(a, now: time)
        let due = TokenBucket.tokenTime(level, at: time, milliPerHour: appRate(a, at: time))
        let penaltyEnd = apps[a].penaltyUntil
        guard penaltyEnd > time, due > penaltyEnd else { return due }
        return TokenBucket.tokenTime(
            appLevel(a, now: penaltyEnd),
            at: penaltyEnd,
            milliPerHour: appRate(a, at: penaltyEnd)
        )
    }

    // MARK: Intervals

    /// Sets how often budget may release the app's silent pushes. False for an unknown handle.
    @discardableResult
    public func setFetchInterval(_ app: AppHandle, _ interval: FetchInterval) -> Bool {
        guard let a = index(of: app) else { return false }
        apps[a].fetchInterval = Self.slotInterval(interval)
        markFetchDirty(a)
        rescheduleBudget(device: Int(apps[a].device))
        return true
    }

    /// The earliest time the app's fetch interval allows a budget release: `.min` for `minimum`
    /// (or before any release), `.max` for `never`.
    func intervalReady(_ a: Int) -> Int64 {
        switch apps[a].fetchInterval {
        case AppSlot.intervalMinimum: return .min
        case AppSlot.intervalNever: return .max
        case let seconds:
            guard apps[a].lastBudgetAt != .min else { return .min }
            return apps[a].lastBudgetAt.addingReportingOverflow(Int64(seconds) * 1000).partialValue
        }
    }

    private static func slotInterval(_ interval: FetchInterval) -> UInt32 {
        switch interval {
        case .minimum: AppSlot.intervalMinimum
        case .never: AppSlot.intervalNever
        case .seconds(let seconds): seconds == 0 ? AppSlot.intervalMinimum : min(seconds, FetchInterval.maxSeconds)
        }
    }

    private static func interval(ofSlot value: UInt32) -> FetchInterval {
        switch value {
        case AppSlot.intervalMinimum: .minimum
        case AppSlot.intervalNever: .never
        default: .seconds(value)
        }
    }

    // MARK: Durability and views

    func markFetchDirty(_ a: Int) {
        guard !apps[a].fetchDirtyListed else { return }
        apps[a].fetchDirtyListed = true
        dirtyFetchApps.append(UInt32(a))
    }

    /// The apps whose fetch figures changed since the last call, each once, as stored; the
    /// caller persists them beside the buckets (a result changes both).
    public func drainDirtyFetchStates() -> [(app: AppHandle, snapshot: FetchSnapshot)] {
        // Asked at every commit of the shard: nearly always nothing, so nothing is built.
        guard !dirtyFetchApps.isEmpty else { return [] }
        var result: [(app: AppHandle, snapshot: FetchSnapshot)] = []
        result.reserveCapacity(dirtyFetchApps.count)
        for slot in dirtyFetchApps {
            let a = Int(slot)
            apps[a].fetchDirtyListed = false
            guard apps[a].isLive else { continue }
            result.append((appHandle(a), fetchSnapshot(app: a)))
        }
        dirtyFetchApps.removeAll(keepingCapacity: true)
        return result
    }

    /// Sets an app's fetch figures as they were stored (a penalty that ended while the gateway
    /// was down has its bucket refilled at the penalty's rate up to its end, at the app's own
    /// after). False for an unknown handle.
    @discardableResult
    public func restoreFetchState(app: AppHandle, _ snapshot: FetchSnapshot) -> Bool {
        guard let a = index(of: app) else { return false }
        apps[a].fetch = snapshot.history
        apps[a].fetchInterval = Self.slotInterval(snapshot.interval)
        apps[a].lastBudgetAt = snapshot.lastBudgetAt ?? .min
        apps[a].penaltyUntil = snapshot.penaltyUntil ?? 0
        rescheduleBudget(device: Int(apps[a].device))
        return true
    }

    public func fetchSnapshot(app: AppHandle) -> FetchSnapshot? {
        index(of: app).map { fetchSnapshot(app: $0) }
    }

    private func fetchSnapshot(app a: Int) -> FetchSnapshot {
        FetchSnapshot(
            history: apps[a].fetch,
            penaltyUntil: apps[a].penaltyUntil == 0 ? nil : apps[a].penaltyUntil,
            interval: Self.interval(ofSlot: apps[a].fetchInterval),
            lastBudgetAt: apps[a].lastBudgetAt == .min ? nil : apps[a].lastBudgetAt
        )
    }

    /// The app's fetch figures at `now`, for the admin view.
    public func fetchFigures(app: AppHandle, now: Int64) -> FetchFigures? {
        guard let a = index(of: app) else { return nil }
        let policy = policy(ofApp: a)
        var snapshot = fetchSnapshot(app: a)
        if let end = snapshot.penaltyUntil, end <= now { snapshot.penaltyUntil = nil }
        let ready = intervalReady(a)
        return FetchFigures(
            snapshot: snapshot,
            configuredRefillMilliPerHour: policy.appRate,
            effectiveRefillMilliPerHour: appRate(a, at: now),
            minRefillMilliPerHour: policy.minAppRate,
            intervalReadyAt: ready == .min || ready <= now ? nil : ready
        )
    }

    /// Registrations whose refill is below the configured one now (results or a penalty), for
    /// `pushgate_silent_refill_scaled`. One pass over the app slots.
    public func scaledRefillCount(now: Int64) -> Int {
        var count = 0
        for a in apps.indices where apps[a].isLive && (apps[a].fetch.score < 1000 || apps[a].penaltyUntil > now) {
            if appRate(a, at: now) < policy(ofApp: a).appRate { count += 1 }
        }
        return count
    }

    /// The device's open fetch windows, newest first.
    public func openFetchWindows(device: DeviceHandle) -> [(seq: UInt64, app: AppHandle, until: Int64)] {
        guard let d = index(of: device) else { return [] }
        var result: [(seq: UInt64, app: AppHandle, until: Int64)] = []
        var w = devices[d].firstWindow
        while w != noSlot {
            let window = windows[Int(w)]
            if window.outcome == nil, apps[Int(window.app)].isLive,
                apps[Int(window.app)].generation == window.appGeneration
            {
                result.append((window.seq, appHandle(Int(window.app)), window.deadline))
            }
            w = window.next
        }
        return result
    }
}
