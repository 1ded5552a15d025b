import NIOCore
import PushgateCore

/// A provider request that passed every rule that can be checked without the device registry:
/// method, path, headers, payload. What remains (does the token exist, is it registered for this
/// topic, is the provider allowed this topic) is checked by the delivery core.
public struct ValidatedPush: Sendable, Equatable {
    /// 64 lowercase hex characters.
    public var deviceToken: String
    /// Lowercase canonical UUID: the request's `apns-id`, or a generated one.
    public var apnsID: String
    public var topic: String
    /// From `apns-push-type`, or inferred from the payload when the header is absent.
    public var pushType: PushType
    public var priority: PushPriority
    public var expiration: Expiration
    public var collapseID: String?
    /// The JSON object exactly as received.
    public var payload: ByteBuffer
    /// A background push: the scheduler's budgets apply.
    public var isSilent: Bool { pushType == .background }

    public init(
        deviceToken: String,
        apnsID: String,
        topic: String,
        pushType: PushType,
        priority: PushPriority,
        expiration: Expiration,
        collapseID: String?,
        payload: ByteBuffer
    ) {
        self.deviceToken = deviceToken
        self.apnsID = apnsID
        self.topic = topic
        self.pushType = pushType
        self.priority = priority
        self.expiration = expiration
        self.collapseID = collapseID
        self.payload = payload
    }
}

/// `apns-expiration`.
public enum Expiration: Sendable, Equatable {
    /// Header absent: the gateway's default lifetime applies (30 days unless configured).
    case defaultLifetime
    /// `0`: deliver now or discard; never stored.
    case immediately
    /// Not valid after this UNIX time (seconds).
    case at(epochSeconds: Int64)
}
