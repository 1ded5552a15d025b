import PushgateCrypto
import PushgateModel

/// The APNs environment a key, or the gateway, stands for.
public enum ProviderEnvironment: String, Sendable, Hashable, CaseIterable {
    case development
    case production
}

/// One provider signing key the operator trusts: tokens whose `kid` is ``keyID`` must be signed
/// by ``publicKey``'s private half, name ``teamID`` as `iss`, and may push only to ``topics``.
public struct ProviderKey: Sendable {
    public let teamID: String
    public let keyID: String
    public let publicKey: ES256PublicKey
    /// The bundle ids as configured. Each also allows its APNs push-type forms (`<topic>.voip`,
    /// `.complication`, `.pushkit.fileprovider`, `.location-query`, ... every suffix in
    /// PushgateModel's `PushType`), as a real token key allows every push type of its apps.
    public let topics: [String]
    /// When set and the keyring has an environment too, tokens are refused unless both agree.
    public let environment: ProviderEnvironment?
    /// ``topics`` and all their suffixed forms, so that a check is one set lookup.
    private let allowedTopics: Set<String>

    /// Throws when an id or a topic has a shape no APNs client could send.
    public init(
        teamID: String,
        keyID: String,
        publicKey: ES256PublicKey,
        topics: [String],
        environment: ProviderEnvironment? = nil
    ) throws(ProviderKeyConfigurationError) {
        if let problem = Self.identifierProblem(keyID) {
            throw ProviderKeyConfigurationError(keyID: keyID, field: "keyId", problem: problem)
        }
        if let problem = Self.identifierProblem(teamID) {
            throw ProviderKeyConfigurationError(keyID: keyID, field: "teamId", problem: problem)
        }
        guard !topics.isEmpty else {
            throw ProviderKeyConfigurationError(
                keyID: keyID,
                field: "topics",
                problem: "no topics; list the bundle ids this key may push to, e.g. [\"com.example.app\"]"
            )
        }
        if let invalid = topics.first(where: { !TopicRules.isValid($0) }) {
            throw ProviderKeyConfigurationError(keyID: keyID, field: "topics", problem: TopicRules.explain(invalid))
        }
        self.teamID = teamID
        self.keyID = keyID
        self.publicKey = publicKey
        self.topics = topics
        self.environment = environment
        var allowed = Set(topics)
        for topic in topics {
            for suffix in PushType.allCases.compactMap(\.topicSuffix) {
                allowed.insert(topic + suffix)
            }
        }
        self.allowedTopics = allowed
    }

    /// Whether tokens of this key may push to `topic` (exact match, or a configured topic plus an
    /// APNs push-type suffix).
    public func allows(topic: String) -> Bool {
        allowedTopics.contains(topic)
    }

    /// A topic both keys may push to (the suffixed forms included), the first in order; nil
    /// when they share none.
    func sharedTopic(with other: ProviderKey) -> String? {
        allowedTopics.filter { other.allows(topic: $0) }.min()
    }

    /// Apple's key and team ids are 10 upper-case letters and digits; operators minting their own
    /// keys get some room, but nothing that would need escaping in JSON or a log line.
    private static func identifierProblem(_ id: String) -> String? {
        if id.isEmpty {
            return "empty; Apple's ids look like \"ABC123DEFG\""
        }
        if id.utf8.count > 64 {
            return "\(id.utf8.count) bytes; at most 64 are allowed"
        }
        let allowed = id.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"):
                return true
            default:
                return false
            }
        }
        return allowed ? nil : "\"\(id)\" may contain only ASCII letters, digits, '-' and '_'"
    }
}
