import PushgateModel

/// One push to deliver now.
public struct Release: Sendable, Hashable {
    public var id: UInt64
    public var device: DeviceHandle
    public var app: AppHandle
    /// `immediate` for a push released on acceptance; `piggyback`, `keepalive`, `online` or
    /// `budget` for a held one (the scheduler never stores: `stored` is the caller's). A
    /// `piggyback` release is among the releases of the priority-10 push that carried it.
    /// `budget` covers both ways the scheduler decides "now" without a wake event: a silent push
    /// when both buckets had a token, and a priority-5 push whose `maxDeferral` ran out.
    public var kind: DeliveryKind

    public init(id: UInt64, device: DeviceHandle, app: AppHandle, kind: DeliveryKind) {
        self.id = id
        self.device = device
        self.app = app
        self.kind = kind
    }
}

/// One held push the scheduler gave up on; the caller deletes it and counts it.
public struct Drop: Sendable, Hashable {
    public var id: UInt64
    public var device: DeviceHandle
    public var app: AppHandle
    public var reason: DropReason

    public init(id: UInt64, device: DeviceHandle, app: AppHandle, reason: DropReason) {
        self.id = id
        self.device = device
        self.app = app
        self.reason = reason
    }
}

/// The effect of an event other than an acceptance.
public struct SchedulerOutput: Sendable, Hashable {
    /// In acceptance order (within a device; across devices too, as ids are global).
    public var releases: [Release]
    public var drops: [Drop]
    /// Fetch windows that ended with no report; the caller forgets them in the store and saves
    /// their apps' fetch figures (`drainDirtyFetchStates`).
    public var fetchTimeouts: [FetchTimeout]

    public init(releases: [Release] = [], drops: [Drop] = [], fetchTimeouts: [FetchTimeout] = []) {
        self.releases = releases
        self.drops = drops
        self.fetchTimeouts = fetchTimeouts
    }

    public var isEmpty: Bool { releases.isEmpty && drops.isEmpty && fetchTimeouts.isEmpty }
}

/// The effect of `accept`.
public struct Acceptance: Sendable, Hashable {
    /// `delivered`: released now, among `releases` as `immediate`. `held`: held until a wake
    /// event, a budget release, its deferral deadline or expiry. `coalesced`: held, replacing the
    /// held push `replaced` (same app, same class, same collapse id), which is among `drops`.
    /// `stored`: a regular push for a device with no open stream, which the caller keeps in the
    /// device's offline queue (the scheduler does not remember it). `discarded`: not kept, for
    /// `discardReason`.
    public var disposition: Disposition
    public var replaced: UInt64?
    public var discardReason: DiscardReason?
    /// A silent push held because this bucket had no token (not when it was held for another
    /// reason: the device offline or in `lowPower`, older held pushes of its app ahead of it).
    public var emptyBudget: BudgetScope?
    /// In acceptance order. With `.delivered`, the push itself as `immediate` and, when it was a
    /// wake event (priority 10), everything that was held for the device, as `piggyback`.
    public var releases: [Release]
    /// Held pushes this one pushed out: `coalesced` (the one it replaced) or `overflow` (the app's
    /// oldest held silent push). Also `expired` held pushes met while piggybacking.
    public var drops: [Drop]

    public init(disposition: Disposition, releases: [Release] = [], drops: [Drop] = []) {
        self.disposition = disposition
        self.releases = releases
        self.drops = drops
    }

    public static func discarded(_ reason: DiscardReason) -> Acceptance {
        var acceptance = Acceptance(disposition: .discarded)
        acceptance.discardReason = reason
        return acceptance
    }

    /// Held, or coalesced when it replaced `replaced`.
    public static func held(replacing replaced: UInt64?, drops: [Drop]) -> Acceptance {
        var acceptance = Acceptance(disposition: replaced == nil ? .held : .coalesced, drops: drops)
        acceptance.replaced = replaced
        return acceptance
    }
}
