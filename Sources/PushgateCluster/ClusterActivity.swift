/// Counts of a node's cluster work, for its metrics.
public struct ClusterActivity: Sendable, Equatable {
    /// Pushes this node took for a device another node holds, and handed to it.
    public var forwardedPushes = 0
    /// Device requests (state, keep-alive, ack, fetch results, registrations) likewise.
    public var forwardedDeviceRequests = 0
    /// Devices claimed because their stream opened here.
    public var streamClaims = 0
    /// Devices claimed because this node had to act for them and no live node held them.
    public var takeovers = 0
    /// Times this node's lease lapsed or was refused, and it let every device go.
    public var leaseLosses = 0

    public init() {}
}
