import PushgateModel
import Testing

/// The error catalog: one word and one status per reason, APNs' where APNs has one.
@Suite("Refusal catalog")
struct RefusalCatalogTests {
    /// Every reason the catalog declares, with the status APNs (apns-reference.md 2.4) or the
    /// contract (PRODUCT.md) gives it.
    static let catalog: [(Refusal.Reason, String, Int)] = [
        (.methodNotAllowed, "MethodNotAllowed", 405), (.badPath, "BadPath", 404),
        (.missingDeviceToken, "MissingDeviceToken", 400), (.badDeviceToken, "BadDeviceToken", 400),
        (.duplicateHeaders, "DuplicateHeaders", 400), (.badMessageId, "BadMessageId", 400),
        (.missingTopic, "MissingTopic", 400), (.badTopic, "BadTopic", 400),
        (.invalidPushType, "InvalidPushType", 400), (.badPriority, "BadPriority", 400),
        (.badExpirationDate, "BadExpirationDate", 400), (.badCollapseId, "BadCollapseId", 400),
        (.badPayload, "BadPayload", 400), (.payloadEmpty, "PayloadEmpty", 400),
        (.payloadTooLarge, "PayloadTooLarge", 413), (.deviceTokenNotForTopic, "DeviceTokenNotForTopic", 400),
        (.unregistered, "Unregistered", 410), (.tooManyRequests, "TooManyRequests", 429),
        (.shutdown, "Shutdown", 503),
        (.missingProviderToken, "MissingProviderToken", 403), (.invalidProviderToken, "InvalidProviderToken", 403),
        (.expiredProviderToken, "ExpiredProviderToken", 403), (.unrelatedKeyIdInToken, "UnrelatedKeyIdInToken", 403),
        (.badEnvironmentKeyIdInToken, "BadEnvironmentKeyIdInToken", 403), (.badCertificate, "BadCertificate", 403),
        (.topicDisallowed, "TopicDisallowed", 400), (.tooManyProviderTokenUpdates, "TooManyProviderTokenUpdates", 429),
        (.unauthorized, "Unauthorized", 401), (.forbidden, "Forbidden", 403),
        (.configurationRefused, "ConfigurationRefused", 422), (.badRequest, "BadRequest", 400),
        (.badState, "BadState", 400),
        (.badLastEventId, "BadLastEventId", 400), (.badFetchResult, "BadFetchResult", 400),
        (.notFound, "NotFound", 404),
        (.tooManyRegistrations, "TooManyRegistrations", 409),
        (.requestHeaderFieldsTooLarge, "RequestHeaderFieldsTooLarge", 431),
        (.httpVersionNotSupported, "HTTPVersionNotSupported", 505), (.serviceUnavailable, "ServiceUnavailable", 503),
        (.misdirectedRequest, "MisdirectedRequest", 421),
        (.internalServerError, "InternalServerError", 500),
        (.badTTL, "BadTTL", 400), (.badUrgency, "BadUrgency", 400), (.badMessageTopic, "BadMessageTopic", 400),
        (.badContentEncoding, "BadContentEncoding", 400), (.vapidRequired, "VapidRequired", 401),
        (.badJwtToken, "BadJwtToken", 403), (.subscriptionConflict, "SubscriptionConflict", 409),
    ]

    @Test("every reason in the catalog has the word and status this table gives it, and no other reason exists")
    func wordsAndStatuses() {
        for (reason, name, status) in Self.catalog {
            #expect(reason.name == name)
            #expect(reason.status == status, "\(name)")
        }
        #expect(
            Set(Self.catalog.map(\.0)) == Set(Refusal.Reason.allCases),
            "a reason added to the catalog needs its row here"
        )
    }

    @Test("statuses are errors: 4xx for the request, 5xx for the gateway")
    func statuses() {
        for reason in Refusal.Reason.allCases {
            #expect((400..<600).contains(reason.status), "\(reason)")
        }
    }

    @Test("only a full device queue is the gateway's own limit, not the provider's fault")
    func gatewayLimits() {
        #expect(Refusal.Reason.allCases.filter(\.isGatewayLimit) == [.tooManyRequests])
        #expect(Refusal.deviceQueueFull(waiting: 7).reason == .tooManyRequests)
        #expect(Refusal.deviceQueueFull(waiting: 7).detail.contains("7 notifications"))
    }

    @Test("an error that is not a refusal becomes a 500 naming it")
    func fromError() {
        struct Broken: Error, CustomStringConvertible { var description: String { "broken thing" } }
        #expect(Refusal(Broken()) == Refusal(.internalServerError, "broken thing"))
        #expect(Refusal(Refusal.unauthorized as any Error) == Refusal.unauthorized)
    }

    @Test("a refusal's status is its reason's")
    func status() {
        let refusal = Refusal(.unregistered, "gone", timestamp: 42)
        #expect(refusal.status == 410)
        #expect(refusal.description == "410 Unregistered: gone")
    }
}
