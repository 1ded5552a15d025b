/// The catalog: every reason the gateway answers with, its status, and when it is used. APNs'
/// reasons keep APNs' words and statuses (apns-reference.md section 2.4), so that provider
/// libraries understand them; the others are Pushgate's own. An enum, so that a word cannot be
/// declared twice and every reason can be listed.
extension Refusal {
    public enum Reason: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
        // MARK: Provider API: the request (APNs)

        /// `:method` is not POST.
        case methodNotAllowed = "MethodNotAllowed"
        /// The path is not `/3/device/<token>`, or has a query.
        case badPath = "BadPath"
        case missingDeviceToken = "MissingDeviceToken"
        /// Not 64 hex digits, or no device has it.
        case badDeviceToken = "BadDeviceToken"
        case duplicateHeaders = "DuplicateHeaders"
        /// `apns-id` is not a UUID.
        case badMessageId = "BadMessageId"
        case missingTopic = "MissingTopic"
        /// A topic that is malformed, does not fit the push type, or (device API) is not registered.
        case badTopic = "BadTopic"
        case invalidPushType = "InvalidPushType"
        case badPriority = "BadPriority"
        case badExpirationDate = "BadExpirationDate"
        case badCollapseId = "BadCollapseId"
        /// Pushgate's own (APNs has no word for it): not a JSON object, a background push that
        /// breaks its rules, a push type that cannot be inferred, a compressed payload.
        case badPayload = "BadPayload"
        case payloadEmpty = "PayloadEmpty"
        case payloadTooLarge = "PayloadTooLarge"
        /// The token is registered for another topic.
        case deviceTokenNotForTopic = "DeviceTokenNotForTopic"
        /// The token was unregistered (its refusal carries the time).
        case unregistered = "Unregistered"
        /// Too many notifications already wait for the device.
        case tooManyRequests = "TooManyRequests"
        /// The gateway is draining.
        case shutdown = "Shutdown"

        // MARK: Provider authentication (APNs)

        case missingProviderToken = "MissingProviderToken"
        /// A bad signature, an unknown key, a malformed token.
        case invalidProviderToken = "InvalidProviderToken"
        case expiredProviderToken = "ExpiredProviderToken"
        case unrelatedKeyIdInToken = "UnrelatedKeyIdInToken"
        case badEnvironmentKeyIdInToken = "BadEnvironmentKeyIdInToken"
        case badCertificate = "BadCertificate"
        /// The key or certificate may not push to this topic.
        case topicDisallowed = "TopicDisallowed"
        case tooManyProviderTokenUpdates = "TooManyProviderTokenUpdates"

        // MARK: Device API (Pushgate)

        /// A missing or wrong device secret, registration secret or admin token, or an unknown
        /// device: one answer.
        case unauthorized = "Unauthorized"
        /// A body that is not the expected JSON.
        case badRequest = "BadRequest"
        /// A power or app state that does not exist.
        case badState = "BadState"
        case badLastEventId = "BadLastEventId"
        /// A fetch result for a seq with no open fetch window: never sent, not a silent push,
        /// already reported, or its window ended (counted as a timeout).
        case badFetchResult = "BadFetchResult"
        /// The device has as many active registrations as a device may have: one must be
        /// unregistered before another app registers.
        case tooManyRegistrations = "TooManyRegistrations"

        // MARK: Web Push (Pushgate's, on RFC 8030 and RFC 8292)

        /// `TTL` missing, repeated, or not decimal digits.
        case badTTL = "BadTTL"
        /// `Urgency` repeated, or not one of `very-low`, `low`, `normal`, `high`.
        case badUrgency = "BadUrgency"
        /// `Topic` repeated, or not 1 to 32 characters of the base64url alphabet.
        case badMessageTopic = "BadMessageTopic"
        /// A body without `Content-Encoding: aes128gcm` (RFC 8291), or a repeated header.
        case badContentEncoding = "BadContentEncoding"
        /// The subscription is restricted to an application server key and the request carries
        /// no VAPID authorization.
        case vapidRequired = "VapidRequired"
        /// VAPID authorization that does not hold: a bad signature, `aud` not the endpoint's
        /// origin, `exp` past or more than 24 h ahead, a key not the subscription's. Apple's
        /// web push service answers the same word.
        case badJwtToken = "BadJwtToken"
        /// A subscription name the device already uses with another application server key, or
        /// for an APNs registration.
        case subscriptionConflict = "SubscriptionConflict"

        // MARK: Operator routes (Pushgate)

        /// No admin token is configured and the peer is not on loopback.
        case forbidden = "Forbidden"
        /// A reload's files cannot be used (a corrupt key, a missing file, a bad setting): the
        /// running configuration keeps serving.
        case configurationRefused = "ConfigurationRefused"

        // MARK: Any route

        case notFound = "NotFound"
        /// The header fields are larger than the gateway reads (32 KiB over HTTP/2).
        case requestHeaderFieldsTooLarge = "RequestHeaderFieldsTooLarge"
        /// The route is HTTP/2 only.
        case httpVersionNotSupported = "HTTPVersionNotSupported"
        /// A request one gateway node forwarded to another for a device the second does not own
        /// (it moved meanwhile): the first asks the database again.
        case misdirectedRequest = "MisdirectedRequest"
        /// The store cannot take or commit the change now (overloaded, disk full, I/O error):
        /// nothing was kept; retry.
        case serviceUnavailable = "ServiceUnavailable"
        case internalServerError = "InternalServerError"

        /// The word in the error body's `reason` field.
        public var name: String { rawValue }

        public var description: String { rawValue }

        /// The HTTP status that goes with the reason; a reason never changes status.
        public var status: Int {
            switch self {
            case .missingDeviceToken, .badDeviceToken, .duplicateHeaders, .badMessageId, .missingTopic, .badTopic,
                .invalidPushType, .badPriority, .badExpirationDate, .badCollapseId, .badPayload, .payloadEmpty,
                .deviceTokenNotForTopic, .topicDisallowed, .badRequest, .badState, .badLastEventId, .badFetchResult,
                .badTTL, .badUrgency, .badMessageTopic, .badContentEncoding:
                400
            case .unauthorized, .vapidRequired: 401
            case .missingProviderToken, .invalidProviderToken, .expiredProviderToken, .unrelatedKeyIdInToken,
                .badEnvironmentKeyIdInToken, .badCertificate, .forbidden, .badJwtToken:
                403
            case .badPath, .notFound: 404
            case .methodNotAllowed: 405
            case .unregistered: 410
            case .tooManyRegistrations, .subscriptionConflict: 409
            case .configurationRefused: 422
            case .misdirectedRequest: 421
            case .payloadTooLarge: 413
            case .requestHeaderFieldsTooLarge: 431
            case .tooManyRequests, .tooManyProviderTokenUpdates: 429
            case .internalServerError: 500
            case .shutdown, .serviceUnavailable: 503
            case .httpVersionNotSupported: 505
            }
        }

        /// The gateway's own limit was reached, not a fault in the request: a provider is not
        /// counted as misbehaving for it.
        public var isGatewayLimit: Bool { self == .tooManyRequests }
    }
}

extension Refusal {
    /// 429 as APNs answers too many pushes for one device: here, `waiting` notifications are
    /// already queued or held for it.
    public static func deviceQueueFull(waiting: Int) -> Refusal {
        Refusal(.tooManyRequests, "\(waiting) notifications are already waiting for this device; retry later")
    }

    /// The memory the gateway gives waiting notifications, all devices together, is spent.
    public static func gatewayQueuesFull(megabytes: Int) -> Refusal {
        Refusal(
            .tooManyRequests,
            "the gateway's notifications waiting for devices fill the \(megabytes) MiB it keeps for them (queuedNotificationBudgetBytes); retry later"
        )
    }

    /// One app's share of a device's queue is full; other apps' pushes to the device still go.
    public static func appQueueFull(waiting: Int) -> Refusal {
        Refusal(
            .tooManyRequests,
            "\(waiting) notifications of this app are already waiting for this device (the limit per app); retry later, or use apns-collapse-id so that a newer push replaces an older one"
        )
    }

    /// The same answer for a wrong secret and an unknown device: it never tells whether a device
    /// id exists.
    public static let unauthorized = Refusal(
        .unauthorized,
        "missing or wrong device secret: send authorization: bearer <secret> as returned by POST /v1/devices"
    )

    /// A token no device has: the same words wherever the lookup fails.
    public static func unknownDeviceToken(_ token: String) -> Refusal {
        Refusal(.badDeviceToken, "no device has the token \(token)")
    }

    /// `error` as a refusal: itself when it is one, the refusal it names when it knows one (a
    /// store's outage is a 503 to retry), else `500 InternalServerError` naming it.
    public init(_ error: any Error) {
        self =
            error as? Refusal ?? (error as? any RefusalConvertible)?.refusal
            ?? Refusal(.internalServerError, "\(error)")
    }
}

/// An error that knows how a request it failed is answered, wherever it surfaces.
public protocol RefusalConvertible: Error {
    var refusal: Refusal { get }
}
