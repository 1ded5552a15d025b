/// A push as its provider sent it, validated: every rule that can be checked without the device
/// registry holds. What remains (does the token exist, is it registered for this topic) is
/// checked by delivery, which accepts it into an ``AcceptedPush``.
public struct Push: Sendable, Equatable {
    /// 64 lowercase hex characters.
    public var deviceToken: String
    /// Lowercase canonical UUID: the request's `apns-id`, or a generated one.
    public var apnsID: String
    public var topic: String
    /// From `apns-push-type`, or inferred from the payload when the header is absent.
    public var pushType: PushType
    public var priority: PushPriority
    public var collapseID: String?
    /// The JSON object exactly as received.
    public var payload: [UInt8]

    public init(
        deviceToken: String,
        apnsID: String,
        topic: String,
        pushType: PushType,
        priority: PushPriority,
        collapseID: String?,
        payload: [UInt8]
    ) {
        self.deviceToken = deviceToken
        self.apnsID = apnsID
        self.topic = topic
        self.pushType = pushType
        self.priority = priority
        self.collapseID = collapseID
        self.payload = payload
    }
}

/// `apns-expiration`, as the provider asked; delivery resolves it into a notification's
/// `expiresAt`.
public enum Expiration: Sendable, Equatable {
    /// Header absent: the gateway's default lifetime applies (30 days unless configured).
    case defaultLifetime
    /// `0`: deliver now or discard; never stored.
    case immediately
    /// Not valid after this UNIX time (seconds).
    case at(epochSeconds: Int64)
}
