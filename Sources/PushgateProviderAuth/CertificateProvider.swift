import PushgateModel

/// A provider identified by a TLS client certificate that the operator's CA issued and OpenSSL
/// verified. The subject's UID attribute is the app's bundle id, as in Apple's provider
/// certificates (`UID=com.example.app, CN=Apple Push Services: com.example.app, ...`).
///
/// ## Topics
/// One certificate covers one app, as at APNs: the UID's bundle id, and its push-type forms
/// (`.voip`, `.complication`, `.pushkit.fileprovider`, `.voip-ptt`, `.push-type.widgets`,
/// `.push-type.controls`) — except `.location-query` and `.push-type.liveactivity`, whose push
/// types APNs serves over token authentication only (`400 TopicDisallowed`).
///
/// ## No `apns-topic`
/// APNs makes `apns-topic` mandatory (`400 MissingTopic`) only for certificates that list several
/// topics in Apple's extension `1.2.840.113635.100.6.3.6`, and otherwise uses the certificate's
/// bundle id. Pushgate certificates name a single bundle id, their UID, so a request without
/// `apns-topic` goes to that bundle id; the push-type forms are never implied.
public struct CertificateProvider: Sendable, Equatable {
    /// The subject on one line (RFC 2253), for messages.
    public let subject: String
    /// The UID when it is a usable topic.
    public let bundleID: String?
    private let userID: String?

    /// Push types that need token authentication at APNs.
    private static let tokenOnlySuffixes: Set<String> = Set(
        [PushType.location, .liveactivity].compactMap(\.topicSuffix)
    )
    private static let certificateSuffixes = PushType.allCases
        .compactMap(\.topicSuffix)
        .filter { !tokenOnlySuffixes.contains($0) }

    /// `userID` is the subject's first UID attribute (nil when it has none).
    public init(userID: String?, subject: String) {
        self.subject = subject
        self.userID = userID
        self.bundleID = userID.flatMap { TopicRules.isValid($0) ? $0 : nil }
    }

    public func authorize(topic: String?) -> Result<AuthorizedProvider, Refusal> {
        guard let bundleID else {
            let problem: String
            if let userID {
                problem = "its subject UID is not a bundle id (\(TopicRules.explain(userID)))"
            } else {
                problem = "its subject has no UID attribute naming the app's bundle id"
            }
            return .failure(
                Refusal(
                    .badCertificate,
                    "the client certificate \"\(subject)\" cannot push: \(problem); ask the operator for a certificate with UID=<bundle id>"
                )
            )
        }
        let identity = AuthorizedProvider.Identity.certificate(subject: subject)
        guard let topic else {
            return .success(AuthorizedProvider(identity: identity, topic: bundleID))
        }
        if topic == bundleID || Self.certificateSuffixes.contains(where: { Self.topic(topic, is: bundleID, plus: $0) })
        {
            return .success(AuthorizedProvider(identity: identity, topic: topic))
        }
        if let suffix = Self.tokenOnlySuffixes.first(where: { Self.topic(topic, is: bundleID, plus: $0) }) {
            return .failure(
                Refusal(
                    .topicDisallowed,
                    "topic \"\(topic)\" (\(suffix)) needs token authentication; certificates cannot send that push type"
                )
            )
        }
        return .failure(
            Refusal(
                .topicDisallowed,
                "the client certificate is for \"\(bundleID)\" and may not push to topic \"\(topic.prefix(255))\""
            )
        )
    }

    /// `topic == bundleID + suffix`, without building the concatenation.
    private static func topic(_ topic: String, is bundleID: String, plus suffix: String) -> Bool {
        topic.utf8.count == bundleID.utf8.count + suffix.utf8.count && topic.hasPrefix(bundleID)
            && topic.hasSuffix(suffix)
    }
}
