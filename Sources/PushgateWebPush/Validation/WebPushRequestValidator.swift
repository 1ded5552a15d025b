import NIOCore
import PushgateCrypto
import PushgateDelivery
import PushgateModel

/// Pure validation of a push to a Web Push endpoint (`POST <endpoint>`, RFC 8030 section 5): no
/// clock (the time is given), no I/O; the only randomness (message ids) is injected.
///
/// ## Order of the rules
/// A request with several faults is refused for the first in this order:
///
///  1. The path is not `/webpush/<64 hex digits>` → 404 `NotFound` (as an unknown endpoint).
///  2. No subscription has the token → 404 `NotFound`; it was deleted → 410 `Unregistered`
///     (delivery).
///  3. `TTL` missing, repeated, or not decimal digits → 400 `BadTTL`. A larger one is kept as
///     `maxTTLSeconds` and answered so in the 201's `TTL`.
///  4. `Urgency` repeated or not `very-low`, `low`, `normal`, `high` (any case) → 400
///     `BadUrgency`; absent is `normal`.
///  5. `Topic` repeated, or not 1 to 32 characters of `A-Z a-z 0-9 - _` → 400 `BadMessageTopic`.
///  6. A body over 4,096 bytes → 413 `PayloadTooLarge`.
///  7. A non-empty body without `Content-Encoding: aes128gcm` (one value, any case; `aesgcm`
///     and compressions are refused) → 400 `BadContentEncoding`. An empty body is an empty
///     message, whatever the header.
///  8. A subscription restricted to an application server key and no `authorization` → 401
///     `VapidRequired` (delivery).
///  9. An `authorization` that is not valid VAPID, on any subscription → 403 `BadJwtToken`: not
///     `vapid t=..., k=...`, a JWT that is malformed, not ES256, not signed by `k`, whose `aud`
///     is not the endpoint's origin or whose `exp` is past or more than 24 hours (and a minute
///     of clock leeway) ahead; or a `k` that is not the restricted subscription's (delivery).
/// 10. The gateway's limits on waiting notifications → 429 `TooManyRequests` with `retry-after`
///     (delivery).
///
/// Rules 3 to 7 and the VAPID verdict are decided here, each apart (`WebPushSubmission`), and
/// the subscription's shard answers in this order once it knows the subscription.
public struct WebPushRequestValidator: Sendable {
    /// The longest `TTL` kept (28 days unless configured).
    public var maxTTLSeconds: Int64
    private let uuidBits: @Sendable () -> (UInt64, UInt64)

    public static let defaultMaxTTLSeconds: Int64 = 28 * 24 * 3600
    /// RFC 8030 section 7.2: a push service must take bodies of up to 4,096 bytes.
    public static let maxBodyBytes = 4096
    /// `Topic`: at most 32 characters (RFC 8030 section 5.4).
    public static let maxTopicLength = 32

    public init(
        maxTTLSeconds: Int64 = defaultMaxTTLSeconds,
        uuidGenerator: @escaping @Sendable () -> (UInt64, UInt64) = {
            (try? SecureRandom.uint64Pair())
                ?? {
                    var rng = SystemRandomNumberGenerator()
                    return (rng.next(), rng.next())
                }()
        }
    ) {
        self.maxTTLSeconds = maxTTLSeconds
        self.uuidBits = uuidGenerator
    }

    /// The token of an endpoint's path, lowercase; nil when the path is not one (rule 1).
    public static func token(inPath path: some StringProtocol) -> String? {
        guard path.hasPrefix(WebPushEndpoint.pathPrefix) else { return nil }
        let token = path.dropFirst(WebPushEndpoint.pathPrefix.count)
        guard token.utf8.count == 64, token.utf8.allSatisfy({ $0.isHexDigit }) else { return nil }
        return token.lowercased()
    }

    /// Rules 3 to 7 and VAPID's own checks, for the endpoint `token` whose origin is `origin`
    /// (normalized). `verify` takes an `authorization` header apart and checks its token's
    /// structure and signature (`VAPIDCredential.verified`, which a caller may remember per
    /// connection).
    public func validate(
        token: String,
        fields: WebPushHeaderFields,
        body: ByteBuffer,
        origin: String,
        nowMillis: Int64,
        verify: (String) -> Result<VerifiedVAPID, Refusal> = VAPIDCredential.verified
    ) -> WebPushSubmission {
        WebPushSubmission(
            token: token,
            message: message(token: token, fields: fields, body: body),
            vapid: Self.vapid(fields.authorization, origin: origin, nowMillis: nowMillis, verify: verify)
        )
    }

    private func message(
        token: String,
        fields: WebPushHeaderFields,
        body: ByteBuffer
    ) -> Result<
        WebPushMessage, Refusal
    > {
        // 3. TTL.
        guard let rawTTL = fields.ttl else {
            return .failure(
                Refusal(
                    .badTTL,
                    "TTL is required (RFC 8030 section 5.2): seconds to keep the message, 0 for now or never"
                )
            )
        }
        guard fields.ttlCount == 1 else { return .failure(Refusal(.badTTL, "send TTL once")) }
        guard let ttl = Self.seconds(rawTTL) else {
            return .failure(Refusal(.badTTL, "TTL must be decimal digits (seconds), got \(quoted(rawTTL))"))
        }
        // 4. Urgency.
        var urgency = WebPushUrgency.normal
        if let raw = fields.urgency {
            guard fields.urgencyCount == 1, let value = WebPushUrgency(rawValue: raw.trimmedBlanks.lowercased())
            else {
                return .failure(
                    Refusal(
                        .badUrgency,
                        "Urgency must be one value of very-low, low, normal or high (RFC 8030 section 5.3), got \(fields.urgencyCount > 1 ? "\(fields.urgencyCount) Urgency fields" : quoted(raw))"
                    )
                )
            }
            urgency = value
        }
        // 5. Topic.
        var topic: String?
        if let raw = fields.topic {
            let value = raw.trimmedBlanks
            guard fields.topicCount == 1, (1...Self.maxTopicLength).contains(value.utf8.count),
                value.utf8.allSatisfy(\.isBase64URL)
            else {
                return .failure(
                    Refusal(
                        .badMessageTopic,
                        "Topic must be one value of 1 to 32 characters of A-Z a-z 0-9 - _ (RFC 8030 section 5.4), got \(fields.topicCount > 1 ? "\(fields.topicCount) Topic fields" : quoted(raw))"
                    )
                )
            }
            topic = value
        }
        // 6. Size.
        let size = body.readableBytes
        guard size <= Self.maxBodyBytes else {
            return .failure(
                Refusal(
                    .payloadTooLarge,
                    "the body is \(size) bytes; at most \(Self.maxBodyBytes) are taken (\(Self.maxBodyBytes - WebPushEncryption.overhead) bytes of plaintext in one aes128gcm record)"
                )
            )
        }
        // 7. Content-Encoding.
        if size > 0 {
            let encoding = fields.contentEncoding?.trimmedBlanks.lowercased()
            guard fields.contentEncodingCount == 1, encoding == "aes128gcm" else {
                return .failure(
                    Refusal(
                        .badContentEncoding,
                        "a message body must be encrypted as Content-Encoding: aes128gcm (RFC 8291), got \(fields.contentEncoding.map(quoted) ?? "none")"
                    )
                )
            }
        }
        let kept = min(ttl, maxTTLSeconds)
        let push = Push(
            deviceToken: token,
            apnsID: UUIDText.v4(uuidBits()),
            topic: "",
            pushType: .webpush,
            priority: urgency.priority,
            collapseID: topic,
            payload: Array(body.readableBytesView),
            urgency: urgency
        )
        return .success(WebPushMessage(push: push, ttlSeconds: kept))
    }

    /// The VAPID verdict of an `authorization` header.
    static func vapid(
        _ authorization: String?,
        origin: String,
        nowMillis: Int64,
        verify: (String) -> Result<VerifiedVAPID, Refusal>
    ) -> VAPIDVerdict {
        guard let authorization else { return .absent }
        switch verify(authorization) {
        case .failure(let refusal): return .invalid(refusal)
        case .success(let verified):
            if let refusal = verified.claims.check(origin: origin, nowMillis: nowMillis) { return .invalid(refusal) }
            return .valid(key: verified.key)
        }
    }

    /// `1*DIGIT`, blanks around allowed; a value past `Int64` is kept as its largest (RFC 8030
    /// section 5.2 lets a push service keep a message for less than asked).
    static func seconds(_ text: String) -> Int64? {
        let digits = text.trimmedBlanks
        guard !digits.isEmpty, digits.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else {
            return nil
        }
        return Int64(digits) ?? .max
    }
}

extension String {
    var trimmedBlanks: String { String(Substring(self).trimmingBlanks()) }
}

extension UInt8 {
    var isHexDigit: Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(self)
            || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(self | 0x20)
    }

    var isBase64URL: Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(self)
            || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(self | 0x20)
            || self == UInt8(ascii: "-") || self == UInt8(ascii: "_")
    }
}
