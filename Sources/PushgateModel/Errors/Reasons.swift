/// The catalog: every reason the gateway answers with, its status, and when it is used. APNs'
/// reasons keep APNs' words and statuses (apns-reference.md section 2.4), so that provider
/// libraries understand them; the others are Pushgate's own.
extension Refusal.Reason {
    // MARK: Provider API: the request (APNs)

    /// `:method` is not POST.
    public static let methodNotAllowed = Self("MethodNotAllowed", 405)
    /// The path is not `/3/device/<token>`, or has a query.
    public static let badPath = Self("BadPath", 404)
    public static let missingDeviceToken = Self("MissingDeviceToken", 400)
    /// Not 64 hex digits, or no device has it.
    public static let badDeviceToken = Self("BadDeviceToken", 400)
    public static let duplicateHeaders = Self("DuplicateHeaders", 400)
    /// `apns-id` is not a UUID.
    public static let badMessageId = Self("BadMessageId", 400)
    public static let missingTopic = Self("MissingTopic", 400)
    /// A topic that is malformed, does not fit the push type, or (device API) is not registered.
    public static let badTopic = Self("BadTopic", 400)
    public static let invalidPushType = Self("InvalidPushType", 400)
    public static let badPriority = Self("BadPriority", 400)
    public static let badExpirationDate = Self("BadExpirationDate", 400)
    public static let badCollapseId = Self("BadCollapseId", 400)
    /// Pushgate's own (APNs has no word for it): not a JSON object, a background push that
    /// breaks its rules, a push type that cannot be inferred, a compressed payload.
    public static let badPayload = Self("BadPayload", 400)
    public static let payloadEmpty = Self("PayloadEmpty", 400)
    public static let payloadTooLarge = Self("PayloadTooLarge", 413)
    /// The token is registered for another topic.
    public static let deviceTokenNotForTopic = Self("DeviceTokenNotForTopic", 400)
    /// The token was unregistered (its refusal carries the time).
    public static let unregistered = Self("Unregistered", 410)
    /// Too many notifications already wait for the device.
    public static let tooManyRequests = Self("TooManyRequests", 429, isGatewayLimit: true)
    /// The gateway is draining.
    public static let shutdown = Self("Shutdown", 503)

    // MARK: Provider authentication (APNs)

    public static let missingProviderToken = Self("MissingProviderToken", 403)
    /// A bad signature, an unknown key, a malformed token.
    public static let invalidProviderToken = Self("InvalidProviderToken", 403)
    public static let expiredProviderToken = Self("ExpiredProviderToken", 403)
    public static let unrelatedKeyIdInToken = Self("UnrelatedKeyIdInToken", 403)
    public static let badEnvironmentKeyIdInToken = Self("BadEnvironmentKeyIdInToken", 403)
    public static let badCertificate = Self("BadCertificate", 403)
    /// The key or certificate may not push to this topic.
    public static let topicDisallowed = Self("TopicDisallowed", 400)
    public static let tooManyProviderTokenUpdates = Self("TooManyProviderTokenUpdates", 429)

    // MARK: Device API (Pushgate)

    /// A missing or wrong device secret or registration secret, or an unknown device: one answer.
    public static let unauthorized = Self("Unauthorized", 401)
    /// A body that is not the expected JSON.
    public static let badRequest = Self("BadRequest", 400)
    /// A power or app state that does not exist.
    public static let badState = Self("BadState", 400)
    public static let badLastEventId = Self("BadLastEventId", 400)

    // MARK: Any route

    public static let notFound = Self("NotFound", 404)
    /// The route is HTTP/2 only.
    public static let httpVersionNotSupported = Self("HTTPVersionNotSupported", 505)
    /// The store cannot take or commit the change now (overloaded, disk full, I/O error):
    /// nothing was kept; retry.
    public static let serviceUnavailable = Self("ServiceUnavailable", 503)
    public static let internalServerError = Self("InternalServerError", 500)
}

extension Refusal {
    /// 429 as APNs answers too many pushes for one device: here, `waiting` notifications are
    /// already queued or held for it.
    public static func deviceQueueFull(waiting: Int) -> Refusal {
        Refusal(.tooManyRequests, "\(waiting) notifications are already waiting for this device; retry later")
    }

    /// The same answer for a wrong secret and an unknown device: it never tells whether a device
    /// id exists.
    public static let unauthorized = Refusal(
        .unauthorized,
        "missing or wrong device secret: send authorization: bearer <secret> as returned by POST /v1/devices"
    )
}
