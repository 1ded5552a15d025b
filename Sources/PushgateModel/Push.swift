/// A push as its provider sent it, validated: every rule that can be checked without the device
/// registry holds. What remains (does the token exist, is it registered for this topic) is
/// checked by delivery, which accepts it into an ``AcceptedPush``.
public struct Push: Sendable, Equatable {
    /// 64 lowercase hex characters.
    public var deviceToken: String {
        get { storage.deviceToken }
        set { writableStorage().deviceToken = newValue }
    }
    /// Lowercase canonical UUID: the request's `apns-id`, or a generated one.
    public var apnsID: String {
        get { storage.apnsID }
        set { writableStorage().apnsID = newValue }
    }
    public var topic: String {
        get { storage.topic }
        set { writableStorage().topic = newValue }
    }
    /// From `apns-push-type`, or inferred from the payload when the header is absent.
    public var pushType: PushType {
        get { storage.pushType }
        set { writableStorage().pushType = newValue }
    }
    public var priority: PushPriority {
        get { storage.priority }
        set { writableStorage().priority = newValue }
    }
    public var collapseID: String? {
        get { storage.collapseID }
        set { writableStorage().collapseID = newValue }
    }
    /// The JSON object exactly as received; a Web Push message's body, opaque bytes (RFC 8291
    /// ciphertext, or empty), never decrypted.
    public var payload: [UInt8] {
        get { storage.payload }
        set { writableStorage().payload = newValue }
    }
    /// A Web Push message's `Urgency` (its push type is `webpush`); nil for an APNs push.
    public var urgency: WebPushUrgency? {
        get { storage.urgency }
        set { writableStorage().urgency = newValue }
    }

    /// Silent or regular: a Web Push message's by its urgency, an APNs push's by its type.
    public var pushClass: PushClass { storage.urgency?.pushClass ?? storage.pushType.pushClass }

    /// The fields, behind one reference copied on write: a push is copied a dozen times on its
    /// way (into its acceptance, the scheduler, the store's command, the device's queue), and
    /// each copy of the fields themselves retained and released four strings and the payload.
    private var storage: Storage

    public init(
        deviceToken: String,
        apnsID: String,
        topic: String,
        pushType: PushType,
        priority: PushPriority,
        collapseID: String?,
        payload: [UInt8],
        urgency: WebPushUrgency? = nil
    ) {
        storage = Storage(
            deviceToken: deviceToken,
            apnsID: apnsID,
            topic: topic,
            pushType: pushType,
            priority: priority,
            collapseID: collapseID,
            payload: payload,
            urgency: urgency
        )
    }

    public static func == (lhs: Push, rhs: Push) -> Bool {
        lhs.storage === rhs.storage || lhs.storage.fieldsEqual(rhs.storage)
    }

    private mutating func writableStorage() -> Storage {
        if !isKnownUniquelyReferenced(&storage) { storage = storage.copy() }
        return storage
    }

    /// Mutated only through `writableStorage()`, by the one value that holds it: shared
    /// storage is never written, which is what makes it safe to send.
    private final class Storage: @unchecked Sendable {
        var deviceToken: String
        var apnsID: String
        var topic: String
        var pushType: PushType
        var priority: PushPriority
        var collapseID: String?
        var payload: [UInt8]
        var urgency: WebPushUrgency?

        init(
            deviceToken: String,
            apnsID: String,
            topic: String,
            pushType: PushType,
            priority: PushPriority,
            collapseID: String?,
            payload: [UInt8],
            urgency: WebPushUrgency?
        ) {
            self.deviceToken = deviceToken
            self.apnsID = apnsID
            self.topic = topic
            self.pushType = pushType
            self.priority = priority
            self.collapseID = collapseID
            self.payload = payload
            self.urgency = urgency
        }

        func copy() -> Storage {
            Storage(
                deviceToken: deviceToken,
                apnsID: apnsID,
                topic: topic,
                pushType: pushType,
                priority: priority,
                collapseID: collapseID,
                payload: payload,
                urgency: urgency
            )
        }

        func fieldsEqual(_ other: Storage) -> Bool {
            deviceToken == other.deviceToken && apnsID == other.apnsID && topic == other.topic
                && pushType == other.pushType
                && priority == other.priority && collapseID == other.collapseID && payload == other.payload
                && urgency == other.urgency
        }
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
    /// Valid for this many seconds after acceptance (Web Push's `TTL`, more than 0: a `TTL` of 0
    /// is `immediately`).
    case lifetime(seconds: Int64)
}
