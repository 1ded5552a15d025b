import PushgateCore

/// The APNs statuses and reasons of provider authentication, in one place.
extension Refusal {
    static func missingProviderToken(_ detail: String) -> Refusal {
        Refusal(status: 403, reason: "MissingProviderToken", detail: detail)
    }

    static func invalidProviderToken(_ detail: String) -> Refusal {
        Refusal(status: 403, reason: "InvalidProviderToken", detail: detail)
    }

    static func expiredProviderToken(_ detail: String) -> Refusal {
        Refusal(status: 403, reason: "ExpiredProviderToken", detail: detail)
    }

    static func unrelatedKeyIdInToken(_ detail: String) -> Refusal {
        Refusal(status: 403, reason: "UnrelatedKeyIdInToken", detail: detail)
    }

    static func badEnvironmentKeyIdInToken(_ detail: String) -> Refusal {
        Refusal(status: 403, reason: "BadEnvironmentKeyIdInToken", detail: detail)
    }

    static func badCertificate(_ detail: String) -> Refusal {
        Refusal(status: 403, reason: "BadCertificate", detail: detail)
    }

    static func tooManyProviderTokenUpdates(_ detail: String) -> Refusal {
        Refusal(status: 429, reason: "TooManyProviderTokenUpdates", detail: detail)
    }

    static func topicDisallowed(_ detail: String) -> Refusal {
        Refusal(status: 400, reason: "TopicDisallowed", detail: detail)
    }

    static func missingTopic(_ detail: String) -> Refusal {
        Refusal(status: 400, reason: "MissingTopic", detail: detail)
    }
}
