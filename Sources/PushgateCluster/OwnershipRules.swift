/// The database's side of ownership: what it allows, as the SQL of the PostgreSQL store does it,
/// written once here so that the rules can be tested over random interleavings
/// (`Tests/PushgateClusterTests`) and read in one place.
///
/// - A node joins and gets a lease: a new id each time (never reused), expiring `leaseMillis`
///   after each renewal in the database's time. A renewal of an expired lease is refused: the
///   node joins again, so nothing done under the old lease survives a gap in it.
/// - A device is owned by one lease at a time, with an epoch that grows by one at each change of
///   owner. A node claims a device when the device's stream opens on it (the newest stream
///   wins, whoever owned it), or when it must act for a device whose owner's lease has expired
///   or that no one owns (a push for it arrives, an agent's request). Either way only under a
///   live lease.
/// - Every write a node makes as a device's owner carries the epoch it claimed; the database
///   takes it only while the device is still owned by that lease at that epoch and the lease is
///   alive (fencing). A node whose write is refused has lost the device: it drops what it holds
///   of it and ends its stream.
public struct OwnershipRules: Sendable, Equatable {
    public struct Lease: Sendable, Equatable {
        public var node: String
        public var expiresAt: Int64
    }

    public struct Owner: Sendable, Equatable {
        public var lease: UInt64
        public var epoch: UInt64
    }

    public enum ClaimReason: Sendable, Equatable {
        /// The device's stream opened on the claiming node: it takes the device from anyone.
        case stream
        /// The claiming node must act for the device: only if its owner's lease has expired or
        /// it has none.
        case takeover
    }

    public enum ClaimResult: Sendable, Equatable {
        case claimed(epoch: UInt64)
        /// Owned under another live lease: ask that node (`takeover` only).
        case ownedElsewhere(Owner, node: String)
        /// The claimant's own lease is not alive: it must join again.
        case leaseNotAlive
    }

    public let leaseMillis: Int64
    public private(set) var leases: [UInt64: Lease] = [:]
    public private(set) var owners: [String: Owner] = [:]
    private var lastLeaseID: UInt64 = 0

    public init(leaseMillis: Int64) {
        self.leaseMillis = leaseMillis
    }

    public func isAlive(_ lease: UInt64, now: Int64) -> Bool {
        leases[lease].map { $0.expiresAt > now } ?? false
    }

    public mutating func join(node: String, now: Int64) -> UInt64 {
        lastLeaseID += 1
        leases[lastLeaseID] = Lease(node: node, expiresAt: now + leaseMillis)
        return lastLeaseID
    }

    /// Extends a live lease; false for one that has expired (or never was).
    public mutating func renew(_ lease: UInt64, now: Int64) -> Bool {
        guard isAlive(lease, now: now) else { return false }
        leases[lease]?.expiresAt = now + leaseMillis
        return true
    }

    public mutating func claim(_ device: String, by lease: UInt64, reason: ClaimReason, now: Int64) -> ClaimResult {
        guard isAlive(lease, now: now) else { return .leaseNotAlive }
        let current = owners[device]
        if reason == .takeover, let current, current.lease != lease, isAlive(current.lease, now: now) {
            return .ownedElsewhere(current, node: leases[current.lease]?.node ?? "")
        }
        // Already this lease's: the epoch stays, so writes in flight under it still count.
        if let current, current.lease == lease { return .claimed(epoch: current.epoch) }
        let epoch = (current?.epoch ?? 0) + 1
        owners[device] = Owner(lease: lease, epoch: epoch)
        return .claimed(epoch: epoch)
    }

    /// Whether a write as the owner of `device` under `lease` at `epoch` is taken (fencing).
    public func mayWrite(_ device: String, lease: UInt64, epoch: UInt64, now: Int64) -> Bool {
        owners[device] == Owner(lease: lease, epoch: epoch) && isAlive(lease, now: now)
    }
}
