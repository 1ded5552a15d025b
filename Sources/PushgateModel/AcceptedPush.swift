/// An accepted push: what the store keeps, the scheduler holds and a device receives, until the
/// device acknowledges it or it is dropped. Times are UNIX milliseconds.
public struct AcceptedPush: Sendable, Equatable {
    /// Acceptance order, unique across the gateway.
    public var acceptanceID: UInt64
    /// The device the push's token belongs to.
    public var deviceID: String
    public var push: Push
    public var acceptedAt: Int64
    /// Never delivered at or after this time.
    public var expiresAt: Int64
    /// The device's sequence number, assigned when the notification becomes deliverable
    /// (delivered now, or stored for an offline device). Nil while the scheduler holds it.
    public var seq: UInt64?

    public init(acceptanceID: UInt64, deviceID: String, push: Push, acceptedAt: Int64, expiresAt: Int64, seq: UInt64?) {
        self.acceptanceID = acceptanceID
        self.deviceID = deviceID
        self.push = push
        self.acceptedAt = acceptedAt
        self.expiresAt = expiresAt
        self.seq = seq
    }
}
