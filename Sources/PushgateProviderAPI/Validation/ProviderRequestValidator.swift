import NIOCore
import PushgateCrypto
import PushgateModel

/// The verdict on one provider request.
public enum ValidationOutcome: Sendable, Equatable {
    case accepted(Push, expiration: Expiration)
    /// Answer with the refusal and this `apns-id`: the request's own (normalized) when it sent a
    /// single valid one, otherwise a generated one.
    case rejected(Refusal, apnsID: String)

    /// The `apns-id` to put on the response, whatever the verdict.
    public var apnsID: String {
        switch self {
        case .accepted(let push, _): return push.apnsID
        case .rejected(_, let apnsID): return apnsID
        }
    }
}

/// Pure, synchronous validation of one APNs provider request (`POST /3/device/<token>`): method,
/// path, headers and payload. No clock, no I/O; the only randomness (generated `apns-id`s) is
/// injected. Safe to share between threads.
///
/// ## Order of the rules
/// A request with several faults is rejected for the first fault in this order:
///
///  1. `:method` is not `POST` → 405 `MethodNotAllowed`.
///  2. `:path`:
///     a query (`?`) or fragment (`#`) → 404 `BadPath`;
///     not `/3/device` or `/3/device/...` → 404 `BadPath`;
///     `/3/device` or `/3/device/` → 400 `MissingDeviceToken`;
///     a further `/` after the token → 404 `BadPath`;
///     token not exactly 64 hex digits → 400 `BadDeviceToken`.
///  3. A header name that occurs twice → 400 `DuplicateHeaders`, naming the first name (in arrival
///     order) to repeat. `cookie` is exempt: HTTP/2 splits it on purpose (RFC 9113 8.2.3).
///  4. `apns-id` not a canonical UUID → 400 `BadMessageId`.
///  5. `apns-topic` absent → 400 `MissingTopic`; empty, over 255 bytes, or anything but ASCII letters,
///     digits, `.`, `-`, `_` (PushgateModel's `TopicRules`) → 400 `BadTopic`.
///  6. `apns-push-type` not one of ``PushType``'s raw values → 400 `InvalidPushType`; topic does not
///     fit the type (missing suffix, or another type's suffix) → 400 `BadTopic`.
///  7. `apns-priority` not `1`, `5` or `10` → 400 `BadPriority`.
///  8. `apns-expiration` not unsigned decimal digits fitting Int64 → 400 `BadExpirationDate`.
///  9. `apns-collapse-id` over 64 bytes → 400 `BadCollapseId`.
/// 10. `content-encoding` present and not `identity` (any case) → 400 `BadPayload` (payloads are never compressed).
/// 11. Body empty → 400 `PayloadEmpty`; over the type's limit → 413 `PayloadTooLarge`. Checked before
///     any parsing.
/// 12. Body not one RFC 8259 JSON object in UTF-8, or holding a number no Double can hold → 400
///     `BadPayload` (with the byte offset).
/// 13. `aps` present but not an object → 400 `BadPayload`.
/// 14. Push type: `apns-push-type`, else the topic's suffix, else inferred from `aps`; nothing to infer
///     from → 400 `BadPayload`.
/// 15. Background pushes: no `aps` or no `content-available` → 400 `BadPayload`; `content-available`
///     not exactly the integer `1` → 400 `BadPayload`; `alert`, `badge` or `sound` in `aps` →
///     400 `BadPayload`; `apns-priority: 10` → 400 `BadPriority`.
///
/// ## Push type inference (no `apns-push-type`)
/// 1. The topic ends with a type's suffix (`.voip`, `.complication`, ...) → that type.
/// 2. `aps` has `alert`, `badge` or `sound` → `alert`.
/// 3. `aps` has `content-available` equal to the integer `1` (and, by 2, none of those) → `background`.
/// 4. Otherwise → 400 `BadPayload`: "cannot infer the push type ...; send apns-push-type".
///
/// ## Decisions where APNs documents nothing
/// - Device tokens are accepted in either case and normalized to lowercase; percent-escapes are not
///   decoded (a `%` is simply not a hex digit).
/// - `apns-id` is accepted in either case (any version/variant, including the nil UUID) and echoed in
///   lowercase. When the request has no `apns-id`, several, or an invalid one, a random v4 UUID is
///   generated for the response.
/// - Header values are taken exactly as sent: no trimming, no case folding (`apns-push-type: Alert`
///   is invalid). Header names are expected in lowercase, as HTTP/2 requires; other headers are
///   ignored (as APNs ignores unknown headers), except for duplicates.
/// - `apns-expiration` may have leading zeros (`000` is `0`, i.e. `.immediately`); times in the past
///   are syntactically valid and passed on as `.at`.
/// - An empty `apns-collapse-id` means "no collapse id".
/// - Topics follow PushgateModel's `TopicRules` (the rule device registration uses), nothing stricter:
///   `com..x` or `x.` are accepted.
/// - Topic suffixes are compared case-sensitively; the part before the suffix must be non-empty.
///   Push types without a suffix (`alert`, `background`, `mdm`) may not use a topic that ends in
///   another type's suffix.
/// - `aps` may be absent except on background pushes (and when the type must be inferred from it).
/// - `apns-priority` absent: ``defaultPriority`` (10) — except on a background push, where 10 is not
///   allowed: there an absent header means 5 (or ``defaultPriority`` when that is 5 or 1). Only an
///   explicit `10` on a background push is `BadPriority`.
/// - JSON duplicate keys are allowed, last one wins (see ``PayloadScanner``).
public struct ProviderRequestValidator: Sendable {
    /// Priority of a push without `apns-priority` (APNs: 10).
    public var defaultPriority: PushPriority
    private let uuidBits: @Sendable () -> (UInt64, UInt64)

    /// - Parameters:
    ///   - defaultPriority: priority when `apns-priority` is absent (see the type's notes on
    ///     background pushes).
    ///   - uuidGenerator: 128 random bits for a generated `apns-id` (called at most once per
    ///     request, and only when one is needed); version and variant bits are overwritten.
    public init(
        defaultPriority: PushPriority = .high,
        uuidGenerator: @escaping @Sendable () -> (UInt64, UInt64) = {
            do {
                return try SecureRandom.uint64Pair()
            } catch {
                // OpenSSL without entropy: the kernel's generator, which traps if it has none either.
                var rng = SystemRandomNumberGenerator()
                return (rng.next(), rng.next())
            }
        }
    ) {
        self.defaultPriority = defaultPriority
        self.uuidBits = uuidGenerator
    }

    /// Rule 1 alone: the refusal of any method but POST. The route checks it on a request's head,
    /// before the credentials, so that a wrong method is answered 405 whoever sends it (it says
    /// nothing about tokens), not `MissingTopic` or 403 for what a POST would have needed.
    public static func methodRefusal(_ method: String) -> Refusal? {
        method == "POST"
            ? nil
            : Refusal(.methodNotAllowed, ":method must be POST, got \(Detail.quote(method))", allowedMethods: ["POST"])
    }

    /// The `apns-id` of a response to a request refused before validation: the request's own
    /// when it is a valid UUID, else a new one (every APNs response carries one).
    public func responseAPNsID(requestHeader value: String?) -> String {
        value.flatMap(FieldSyntax.canonicalUUID) ?? UUIDText.v4(uuidBits())
    }

    /// Validates one request.
    ///
    /// - Parameters:
    ///   - method: `:method`.
    ///   - path: `:path` exactly as sent.
    ///   - headers: the regular header fields in arrival order, lowercase names, duplicates kept.
    ///   - body: the raw request body (an accepted push's `payload` is a copy of it).
    public func validate<Headers: RandomAccessCollection<(name: String, value: String)>>(
        method: String,
        path: String,
        headers: Headers,
        body: ByteBuffer
    ) -> ValidationOutcome {
        validate(method: method, path: path, fields: ProviderHeaderFields(headers), body: body)
    }

    /// Validates one request whose header fields were read already (the route reads them once
    /// for authentication and validation).
    public func validate(
        method: String,
        path: String,
        fields: ProviderHeaderFields,
        body: ByteBuffer
    ) -> ValidationOutcome {
        // The apns-id the response will carry, whatever happens.
        let requestID: String? = fields.apnsIDCount == 1 ? fields.apnsID.flatMap(FieldSyntax.canonicalUUID) : nil
        func reject(_ refusal: Refusal) -> ValidationOutcome {
            .rejected(refusal, apnsID: requestID ?? UUIDText.v4(uuidBits()))
        }
        func reject(_ reason: Refusal.Reason, _ detail: String) -> ValidationOutcome {
            reject(Refusal(reason, detail))
        }

        // 1. Method.
        if let refusal = Self.methodRefusal(method) { return reject(refusal) }

        // 2. Path and device token.
        let deviceToken: String
        switch Self.parsePath(path) {
        case .token(let token): deviceToken = token
        case .failure(let refusal): return reject(refusal)
        }

        // 3. Duplicate headers.
        if let name = fields.duplicate {
            return reject(
                .duplicateHeaders,
                "header \(Detail.quote(name)) appears more than once; send each header once"
            )
        }

        // 4. apns-id.
        if let raw = fields.apnsID, requestID == nil {
            return reject(
                .badMessageId,
                "apns-id must be a UUID written 8-4-4-4-12 in hex, e.g. \"123e4567-e89b-12d3-a456-4266554400a0\"; got \(Detail.quote(raw))"
            )
        }

        // 5. apns-topic.
        guard let topic = fields.topic else {
            return reject(.missingTopic, "apns-topic is required: send the app's bundle id, e.g. \"com.example.app\"")
        }
        if let problem = FieldSyntax.topicProblem(topic) {
            return reject(.badTopic, problem)
        }
        let topicType = FieldSyntax.pushTypeImplied(byTopic: topic)

        // 6. apns-push-type, and the topic it requires.
        var declaredType: PushType?
        if let raw = fields.pushType {
            guard let type = PushType(rawValue: raw), type != .webpush else {
                return reject(
                    .invalidPushType,
                    "apns-push-type must be one of \(Self.pushTypeList), got \(Detail.quote(raw))"
                )
            }
            if let suffix = type.topicSuffix {
                guard FieldSyntax.hasProperSuffix(topic, suffix) else {
                    return reject(
                        .badTopic,
                        "apns-push-type \(type.rawValue) needs apns-topic <bundle id>\(suffix), got \(Detail.quote(topic))"
                    )
                }
            } else if let other = topicType, let otherSuffix = other.topicSuffix {
                return reject(
                    .badTopic,
                    "apns-topic \(Detail.quote(topic)) ends with \"\(otherSuffix)\", the suffix of \(other.rawValue) pushes; \(type.rawValue) pushes go to \(type == .mdm ? "the MDM certificate's topic" : "the bare bundle id")"
                )
            }
            declaredType = type
        }

        // 7. apns-priority.
        var explicitPriority: PushPriority?
        if let raw = fields.priority {
            guard let priority = FieldSyntax.priority(raw) else {
                return reject(.badPriority, "apns-priority must be 1, 5 or 10, got \(Detail.quote(raw))")
            }
            explicitPriority = priority
        }

        // 8. apns-expiration.
        var expiration = Expiration.defaultLifetime
        if let raw = fields.expiration {
            guard let seconds = FieldSyntax.expirationSeconds(raw) else {
                return reject(
                    .badExpirationDate,
                    "apns-expiration must be a UNIX time in seconds (digits only, 0 = deliver now or never), got \(Detail.quote(raw))"
                )
            }
            expiration = seconds == 0 ? .immediately : .at(epochSeconds: seconds)
        }

        // 9. apns-collapse-id.
        var collapseID: String?
        if let raw = fields.collapseID, !raw.isEmpty {
            let bytes = raw.utf8.count
            guard bytes <= Self.maxCollapseIDBytes else {
                return reject(
                    .badCollapseId,
                    "apns-collapse-id is \(bytes) bytes, at most \(Self.maxCollapseIDBytes) are allowed: \(Detail.quote(raw))"
                )
            }
            collapseID = raw
        }

        // 10. content-encoding.
        if let encoding = fields.contentEncoding, encoding.lowercased() != "identity" {
            return reject(
                .badPayload,
                "the payload must not be compressed, got content-encoding \(Detail.quote(encoding))"
            )
        }

        // 11. Size, before any parsing.
        let size = body.readableBytes
        if size == 0 {
            return reject(
                .payloadEmpty,
                "the payload is empty; send a JSON object, e.g. {\"aps\":{\"alert\":\"Hello\"}}"
            )
        }
        let sizeType = declaredType ?? topicType
        let limit = sizeType?.maxPayloadBytes ?? Self.defaultMaxPayloadBytes
        if size > limit {
            let whose =
                sizeType.map { "\($0.rawValue) pushes" }
                ?? "pushes without apns-push-type (voip: \(PushType.voip.maxPayloadBytes))"
            return reject(.payloadTooLarge, "the payload is \(size) bytes; the limit for \(whose) is \(limit) bytes")
        }

        // 12-15. The payload.
        let payloadVerdict: Result<(PushType, PushPriority), Refusal> = body.withUnsafeReadableBytes { bytes in
            Self.checkPayload(
                bytes,
                declaredType: declaredType ?? topicType,
                explicitPriority: explicitPriority,
                defaultPriority: defaultPriority
            )
        }
        switch payloadVerdict {
        case .failure(let rejection):
            return reject(rejection)
        case .success(let (pushType, priority)):
            let push = Push(
                deviceToken: deviceToken,
                apnsID: requestID ?? UUIDText.v4(uuidBits()),
                topic: topic,
                pushType: pushType,
                priority: priority,
                collapseID: collapseID,
                payload: Array(body.readableBytesView)
            )
            return .accepted(push, expiration: expiration)
        }
    }

    /// Longest `apns-collapse-id`, in UTF-8 bytes.
    public static let maxCollapseIDBytes = 64
    /// Size limit while the push type is unknown (and the topic does not say `voip`).
    public static let defaultMaxPayloadBytes = PushType.alert.maxPayloadBytes
    /// The largest body any provider request may have (VoIP's limit, APNs' largest): one larger
    /// is refused while it arrives, before the push type is known.
    public static let maxBodyBytes = PushType.allCases.map(\.maxPayloadBytes).max() ?? defaultMaxPayloadBytes

    private static let pushTypeList = PushType.apnsTypes.map(\.rawValue).joined(separator: ", ")
}
