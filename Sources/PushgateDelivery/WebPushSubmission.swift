import PushgateModel

/// A Web Push message as its route read it (`POST <endpoint>`, RFC 8030 section 5), before its
/// subscription is looked up: what the headers and body gave, and the VAPID verdict, each kept
/// apart, so that the shard can answer in the contract's order (the endpoint first, then the
/// message's own rules, then VAPID against the subscription's key, then the limits).
public struct WebPushSubmission: Sendable, Equatable {
    /// The endpoint's token: 64 lowercase hex digits.
    public var token: String
    /// The message, or the first of its header and body rules it breaks (400, 413).
    public var message: Result<WebPushMessage, Refusal>
    public var vapid: VAPIDVerdict

    public init(token: String, message: Result<WebPushMessage, Refusal>, vapid: VAPIDVerdict) {
        self.token = token
        self.message = message
        self.vapid = vapid
    }
}

/// A valid message: the push (type `webpush`, its urgency, its `Topic` as the collapse id, its
/// body as the payload) and the `TTL` kept.
public struct WebPushMessage: Sendable, Equatable {
    public var push: Push
    /// The `TTL` the gateway keeps, after the configured maximum: answered in the 201's `TTL`.
    public var ttlSeconds: Int64

    public init(push: Push, ttlSeconds: Int64) {
        self.push = push
        self.ttlSeconds = ttlSeconds
    }

    /// A `TTL` of 0 is now or never.
    public var expiration: Expiration { ttlSeconds == 0 ? .immediately : .lifetime(seconds: ttlSeconds) }
}

/// VAPID (RFC 8292) as the route found it; whether it is needed is the subscription's.
public enum VAPIDVerdict: Sendable, Equatable {
    /// No `authorization` header.
    case absent
    /// A valid token (signature, `aud`, `exp`) signed by this key (an uncompressed P-256 point).
    case valid(key: [UInt8])
    /// Present and not valid: 403 whatever the subscription.
    case invalid(Refusal)
}

/// What the 201 of an accepted Web Push message says.
public struct WebPushAcceptance: Sendable, Equatable {
    /// The message's id (its `Location`).
    public var messageID: String
    public var ttlSeconds: Int64
    public var disposition: Disposition

    public init(messageID: String, ttlSeconds: Int64, disposition: Disposition) {
        self.messageID = messageID
        self.ttlSeconds = ttlSeconds
        self.disposition = disposition
    }
}
