/// The database's side of a cluster, as a node uses it: membership under a lease, who owns a
/// device, claims. The PostgreSQL store implements it, following `OwnershipRules`; a node drives
/// it with `NodeLease` and claims devices as their streams open or as it must act for them.
///
/// Calls block on the database (one connection of their own, never the store's writer's) and
/// fail with the error the database gave; a call whose database cannot be reached fails at its
/// deadline.
public protocol ClusterControl: Sendable {
    /// A new lease for this node, which other nodes reach at `address` (`http://HOST:PORT`).
    func join(node: String, address: String) throws -> UInt64
    /// Extends `lease`, recording how many devices the node holds; false when it had expired
    /// (the node must join again).
    func renew(lease: UInt64, devicesHeld: Int) throws -> Bool
    /// Ends `lease` at once, so that other nodes may take its devices over without waiting for
    /// it to expire (a drained node leaving).
    func leave(lease: UInt64) throws
    /// Claims `device` for `lease` (`OwnershipRules.claim`).
    func claim(device: String, lease: UInt64, reason: OwnershipRules.ClaimReason) throws -> ClaimOutcome
    /// Where the devices of `tokens` are, and who owns them, by token; a token never
    /// registered is missing.
    func locate(tokens: [String]) throws -> [String: DeviceLocation]
    /// Who owns a device; nil for a device that does not exist.
    func locate(device: String) throws -> DeviceLocation?
    /// Of `devices`, those no longer owned by `lease` at the epoch given.
    func lost(_ devices: [(device: String, epoch: UInt64)], lease: UInt64) throws -> [String]
    /// The nodes whose leases are alive.
    func nodes() throws -> [NodeInfo]
}

public enum ClaimOutcome: Sendable, Equatable {
    /// Now owned by the claimant at `epoch`; `previous` is the node it was taken from, if a live
    /// one held it (to be told).
    case claimed(epoch: UInt64, previous: NodeInfo?)
    /// Owned by another live node (a takeover only): ask it.
    case ownedElsewhere(NodeInfo)
    /// The claimant's lease is not alive: it must join again.
    case leaseNotAlive
    /// No such device.
    case unknownDevice
}

/// A device and its owner, as the database has them.
public struct DeviceLocation: Sendable, Equatable {
    public var deviceID: String
    /// The owning node, when a live lease owns the device.
    public var owner: NodeInfo?
    public var epoch: UInt64

    public init(deviceID: String, owner: NodeInfo?, epoch: UInt64) {
        self.deviceID = deviceID
        self.owner = owner
        self.epoch = epoch
    }
}

/// A live node.
public struct NodeInfo: Sendable, Equatable {
    public var lease: UInt64
    public var name: String
    /// Where other nodes reach it.
    public var address: String
    /// Milliseconds since the epoch, the database's clock.
    public var startedAt: Int64
    public var expiresAt: Int64
    /// As of its last renewal.
    public var devicesHeld: Int

    public init(lease: UInt64, name: String, address: String, startedAt: Int64, expiresAt: Int64, devicesHeld: Int = 0)
    {
        self.lease = lease
        self.name = name
        self.address = address
        self.startedAt = startedAt
        self.expiresAt = expiresAt
        self.devicesHeld = devicesHeld
    }
}
